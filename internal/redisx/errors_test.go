package redisx_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
)

// client is a go-redis client of addr without retries (so that each case
// sees the first error) and without connection set-up commands (so that
// the fake server's reply is the command's).
func client(t *testing.T, addr string, mod ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, DisableIdentity: true, DialTimeout: time.Second}
	for _, m := range mod {
		m(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// fakeRedis answers every RESP command with reply (a full RESP line such as
// "-LOADING …"), or never answers when reply is "". It stands in for the
// states a real redis-server is hard to put into (LOADING, cluster errors);
// the go-redis client still parses a real reply off the wire.
func fakeRedis(t *testing.T, reply string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
			go func() {
				r := bufio.NewReader(conn)
				for readCommand(r) == nil {
					if reply != "" {
						_, _ = conn.Write([]byte(reply + "\r\n"))
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return err
	}
	for range n {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
		if err != nil {
			return err
		}
		if _, err := io.CopyN(io.Discard, r, int64(size+2)); err != nil {
			return err
		}
	}
	return nil
}

// replica starts a real redis-server and makes it a replica of an address
// nothing listens on: it keeps its data, serves reads and refuses writes
// (READONLY) until REPLICAOF NO ONE.
func replica(t *testing.T) (*redistest.Server, *redis.Client) {
	s := redistest.Start(t)
	c := client(t, s.Addr)
	host, port, _ := net.SplitHostPort(deadAddr(t))
	require.NoError(t, c.Do(context.Background(), "REPLICAOF", host, port).Err())
	return s, c
}

// TestIsUnavailable classifies real go-redis errors: replies from a real
// redis-server put into the state in question where that is practical,
// and from a fake server speaking RESP for LOADING, CLUSTERDOWN, TRYAGAIN
// and the Redis 6 form of a script's READONLY (a real server needs a large
// dataset, a cluster, a slot migration or an old version for those).
func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	onServer := func(setup func(t *testing.T, s *redistest.Server, c *redis.Client) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			s := redistest.Start(t)
			return setup(t, s, client(t, s.Addr))
		}
	}
	fake := func(reply string) func(t *testing.T) error {
		return func(t *testing.T) error {
			return client(t, fakeRedis(t, reply)).Get(ctx, "k").Err()
		}
	}
	plain := func(err error) func(t *testing.T) error { return func(*testing.T) error { return err } }

	for _, tc := range []struct {
		name        string
		err         func(t *testing.T) error
		unavailable bool
		unanswered  bool
	}{
		// Not errors.
		{"nil", plain(nil), false, false},

		// Redis cannot be reached.
		{"connection refused (real dial)", func(t *testing.T) error { return client(t, deadAddr(t)).Ping(ctx).Err() }, true, true},
		{"server killed under an open connection", onServer(func(t *testing.T, s *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.Ping(ctx).Err())
			s.Kill()
			// Hold the dead server's port (accepting and closing), so that
			// go-redis's redial of the broken connection cannot reach a
			// redis-server another test starts on the freed port.
			if ln, err := net.Listen("tcp", s.Addr); err == nil {
				t.Cleanup(func() { _ = ln.Close() })
				go func() {
					for {
						conn, err := ln.Accept()
						if err != nil {
							return
						}
						_ = conn.Close()
					}
				}()
			}
			return c.Ping(ctx).Err()
		}), true, true},
		{"read timeout (server never answers)", func(t *testing.T) error {
			return client(t, fakeRedis(t, ""), func(o *redis.Options) { o.ReadTimeout = 50 * time.Millisecond }).Ping(ctx).Err()
		}, true, true},
		{"call deadline (server never answers)", func(t *testing.T) error {
			c := client(t, fakeRedis(t, ""), func(o *redis.Options) { o.ContextTimeoutEnabled = true })
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			return c.Ping(cctx).Err()
		}, true, true},
		{"pool timeout", func(t *testing.T) error {
			c := client(t, fakeRedis(t, ""), func(o *redis.Options) {
				o.PoolSize, o.PoolTimeout, o.ReadTimeout = 1, 50*time.Millisecond, 5*time.Second
			})
			go func() { _ = c.Ping(ctx).Err() }() // holds the only connection (the server never answers)
			// Only once it holds it (a busy machine may start it late: a
			// Ping of ours first would hold it instead).
			require.Eventually(t, func() bool {
				st := c.PoolStats()
				return st.TotalConns == 1 && st.IdleConns == 0
			}, 5*time.Second, time.Millisecond)
			return c.Ping(ctx).Err()
		}, true, true},
		{"wrapped context.DeadlineExceeded", plain(fmt.Errorf("tasks: get: %w", context.DeadlineExceeded)), true, true},
		{"wrapped ECONNREFUSED", plain(fmt.Errorf("tasks: transition: %w", syscall.ECONNREFUSED)), true, true},
		{"ECONNRESET", plain(syscall.ECONNRESET), true, true},
		{"EPIPE", plain(&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}), true, true},
		{"io.EOF", plain(fmt.Errorf("x: %w", io.EOF)), true, true},
		{"io.ErrUnexpectedEOF", plain(io.ErrUnexpectedEOF), true, true},
		{"use of closed network connection", plain(fmt.Errorf("read: %w", net.ErrClosed)), true, true},

		// The caller gave up, or closed its client: not temporary.
		{"caller's ctx canceled", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			return c.Ping(cctx).Err()
		}), false, true},
		{"canceled dial wrapped in net.OpError", plain(&net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}), false, true},
		{"closed client", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.Close())
			return c.Ping(ctx).Err()
		}), false, true},

		// Temporary replies from a real redis-server.
		{"READONLY: write to a replica", func(t *testing.T) error {
			_, c := replica(t)
			return c.Set(ctx, "k", "v", 0).Err()
		}, true, true},
		{"READONLY: script writing on a replica", func(t *testing.T) error {
			_, c := replica(t)
			return redis.NewScript(`return redis.call('SET', KEYS[1], 'v')`).Run(ctx, c, []string{"k"}).Err()
		}, true, true},
		{"MASTERDOWN: stale replica", func(t *testing.T) error {
			_, c := replica(t)
			require.NoError(t, c.ConfigSet(ctx, "replica-serve-stale-data", "no").Err())
			return c.Get(ctx, "k").Err()
		}, true, true},
		{"NOREPLICAS: min-replicas-to-write unmet", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.ConfigSet(ctx, "min-replicas-to-write", "1").Err())
			return c.Set(ctx, "k", "v", 0).Err()
		}), true, true},
		{"BUSY: a script past busy-reply-threshold", onServer(func(t *testing.T, s *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.ConfigSet(ctx, "busy-reply-threshold", "20").Err())
			runner := client(t, s.Addr, func(o *redis.Options) { o.ReadTimeout = -1 })
			ran := make(chan error, 1)
			go func() { ran <- runner.Eval(ctx, `while true do end`, nil).Err() }()
			var err error
			require.Eventually(t, func() bool {
				err = c.Ping(ctx).Err()
				return err != nil
			}, 5*time.Second, 5*time.Millisecond)
			require.NoError(t, c.Do(ctx, "SCRIPT", "KILL").Err())
			require.Error(t, <-ran)
			return err
		}), true, true},
		{"UNBLOCKED: blocked client when the server turns replica", onServer(func(t *testing.T, s *redistest.Server, c *redis.Client) error {
			blocked := client(t, s.Addr, func(o *redis.Options) { o.ReadTimeout = -1 })
			res := make(chan error, 1)
			go func() { res <- blocked.BLPop(ctx, 0, "list").Err() }()
			require.Eventually(t, func() bool {
				n, err := c.Info(ctx, "clients").Result()
				return err == nil && strings.Contains(n, "blocked_clients:1")
			}, 5*time.Second, 5*time.Millisecond)
			host, port, _ := net.SplitHostPort(deadAddr(t))
			require.NoError(t, c.Do(ctx, "REPLICAOF", host, port).Err())
			return <-res
		}), true, true},
		// The server sends the reply and closes the connection: the client
		// sees the reply or the reset, depending on timing; both count.
		{"max number of clients reached (reply or reset)", onServer(func(t *testing.T, s *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.ConfigSet(ctx, "maxclients", "1").Err())
			return client(t, s.Addr).Ping(ctx).Err()
		}), true, true},

		// Temporary replies from a fake server (see the test's comment).
		{"LOADING (fake)", fake("-LOADING Redis is loading the dataset in memory"), true, true},
		{"CLUSTERDOWN (fake)", fake("-CLUSTERDOWN Hash slot not served"), true, true},
		{"TRYAGAIN (fake)", fake("-TRYAGAIN Multiple keys request during rehashing of slot"), true, true},
		{"Redis 6 script READONLY (fake)", fake("-ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica."), true, true},
		{"max number of clients reached (fake)", fake("-ERR max number of clients reached"), true, true},
		{"KVRocks ERR LOADING (fake)", fake("-ERR LOADING kvrocks is restoring the db from backup"), true, true},

		// Answers: real replies that are not temporary.
		{"WRONGTYPE", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
			return c.LPush(ctx, "k", "x").Err()
		}), false, false},
		{"NOSCRIPT", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			return c.EvalSha(ctx, strings.Repeat("0", 40), nil).Err()
		}), false, false},
		{"ERR syntax", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			return c.Do(ctx, "SET", "k", "v", "BOGUS").Err()
		}), false, false},
		{"script error", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			return c.Eval(ctx, `return redis.error_reply('agentq bug')`, nil).Err()
		}), false, false},
		{"BUSYKEY is not BUSY", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
			d, err := c.Dump(ctx, "k").Result()
			require.NoError(t, err)
			return c.Restore(ctx, "k", 0, d).Err()
		}), false, false},
		{"BUSYGROUP is not BUSY", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.XGroupCreateMkStream(ctx, "s", "g", "0").Err())
			return c.XGroupCreateMkStream(ctx, "s", "g", "0").Err()
		}), false, false},
		{"OOM", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
			return c.Set(ctx, "k", "v", 0).Err()
		}), false, false},
		{"NOAUTH", onServer(func(t *testing.T, s *redistest.Server, c *redis.Client) error {
			require.NoError(t, c.ConfigSet(ctx, "requirepass", "secret").Err())
			return client(t, s.Addr).Ping(ctx).Err()
		}), false, false},
		{"redis.Nil", onServer(func(t *testing.T, _ *redistest.Server, c *redis.Client) error {
			return c.Get(ctx, "missing").Err()
		}), false, false},
		{"plain text is not a reply", plain(errors.New("LOADING Redis is loading the dataset in memory")), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.err(t)
			if tc.name != "nil" {
				require.Error(t, err)
			}
			require.Equal(t, tc.unavailable, redisx.IsUnavailable(err), "IsUnavailable(%#v) [%v]", err, err)
			require.Equal(t, tc.unavailable, redisx.IsUnavailable(fmt.Errorf("wrapped: %w", err)), "IsUnavailable of the wrapped %v", err)
			require.Equal(t, tc.unanswered, redisx.Unanswered(err), "Unanswered(%#v) [%v]", err, err)
		})
	}
}

// replyErr stands in for a Redis error reply (redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// TestTxErr: an EXEC aborted because a queued command was refused gives
// that command's error when it is temporary (LOADING after a restart:
// unavailable, so untilRedis waits), else the EXECABORT itself.
func TestTxErr(t *testing.T) {
	t.Parallel()
	cmd := func(err error) redis.Cmder {
		c := redis.NewIntCmd(context.Background(), "hincrby", "k", "f", 1)
		c.SetErr(err)
		return c
	}
	abort := replyErr("EXECABORT Transaction discarded because of previous errors.")
	loading := replyErr("LOADING Redis is loading the dataset in memory")

	err := redisx.TxErr([]redis.Cmder{cmd(loading), cmd(loading)}, abort)
	require.Equal(t, error(loading), err)
	require.True(t, redisx.IsUnavailable(err))

	syntax := replyErr("ERR wrong number of arguments for 'hincrby' command")
	require.Equal(t, error(abort), redisx.TxErr([]redis.Cmder{cmd(syntax)}, abort))
	require.False(t, redisx.IsUnavailable(redisx.TxErr([]redis.Cmder{cmd(syntax)}, abort)))

	other := replyErr("WRONGTYPE Operation against a key holding the wrong kind of value")
	require.Equal(t, error(other), redisx.TxErr(nil, other))
	require.NoError(t, redisx.TxErr([]redis.Cmder{cmd(nil)}, nil))
}
