package notify

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// shard is one PubSub connection of the Hub and the channels subscribed
// on it.
type shard struct {
	h       *Hub
	key     string
	client  redis.UniversalClient // a single Redis, or one Cluster node
	cluster bool                  // one SSUBSCRIBE per channel (channels of a command must share a slot)
	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]struct{}
	closed  bool
}

// attach subscribes e's channel on its shard.
func (h *Hub) attach(ctx context.Context, e *entry) error {
	sh, err := h.shardFor(ctx, e.id, e.ch)
	if err != nil {
		return err
	}
	h.mu.Lock()
	e.shard = sh
	h.mu.Unlock()
	return sh.subscribe(ctx, e)
}

// shardFor is the shard of task id's channel ch, made (and its receiver
// started) when it is the first: on a Cluster the shard of the master
// that serves ch's slot, else one of Options.Shards by a hash of id.
func (h *Hub) shardFor(ctx context.Context, id, ch string) (*shard, error) {
	var key string
	var client redis.UniversalClient = h.rdb
	cc, cluster := h.rdb.(*redis.ClusterClient)
	if cluster {
		node, err := cc.MasterForKey(ctx, ch)
		if err != nil {
			return nil, err
		}
		client, key = node, node.Options().Addr
	} else {
		f := fnv.New32a()
		_, _ = f.Write([]byte(id))
		key = strconv.Itoa(int(f.Sum32() % uint32(h.opts.Shards)))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return nil, ErrStopped
	}
	if sh, ok := h.shards[key]; ok {
		return sh, nil
	}
	sh := &shard{h: h, key: key, client: client, cluster: cluster, chans: map[string]struct{}{}}
	sh.ps = client.SSubscribe(h.ctx)
	h.shards[key] = sh
	h.wg.Add(1)
	go sh.run()
	return sh, nil
}

// subscribe subscribes e's channel, unless e has been released meanwhile.
func (s *shard) subscribe(ctx context.Context, e *entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.mu.Lock()
	live := s.h.entries[e.ch] == e
	s.h.mu.Unlock()
	if !live || s.closed {
		e.confirm()
		return nil
	}
	s.chans[e.ch] = struct{}{}
	return s.ps.SSubscribe(ctx, e.ch)
}

// unsubscribe drops channel ch, unless a new entry took it meanwhile.
func (s *shard) unsubscribe(ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.mu.Lock()
	_, again := s.h.entries[ch]
	s.h.mu.Unlock()
	if again || s.closed {
		return
	}
	delete(s.chans, ch)
	_ = s.ps.SUnsubscribe(s.h.ctx, ch)
}

// close closes the shard's connection (its receiver then returns).
func (s *shard) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	_ = s.ps.Close()
}

// run receives the shard's messages until the Hub stops: a confirmation
// releases the Subscribe waiting for it, an announcement wakes the Subs of
// its task. When the connection is lost go-redis makes it again and
// subscribes its channels again (all in one command: on a Cluster node
// that is refused with CROSSSLOT, and the shard then subscribes them again
// one by one); either way every Sub of the shard is woken, since
// announcements may have been missed meanwhile.
func (s *shard) run() {
	h := s.h
	defer h.wg.Done()
	fails := 0
	warned := false
	for {
		s.mu.Lock()
		ps := s.ps
		s.mu.Unlock()
		msg, err := ps.Receive(h.ctx)
		if h.stopped() {
			return
		}
		if err != nil {
			var rerr redis.Error
			switch {
			case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "CROSSSLOT"):
				s.resubscribe()
			case errors.As(err, &rerr):
				// Refused (a Redis without SSUBSCRIBE): no confirmation is
				// coming; the re-check is the notification.
				if !warned {
					h.opts.Logger.Warn("notify: Redis refused SSUBSCRIBE; waiters are told by the re-check (about 1 s)", "err", err)
					warned = true
				}
				h.confirmShard(s)
				continue
			default:
				h.opts.Logger.Warn("notify: pubsub connection lost; subscribing again", "shard", s.key, "err", err)
			}
			h.confirmShard(s)
			h.wakeShard(s)
			fails++
			if !sleepCtx(h.ctx, min(time.Duration(fails)*50*time.Millisecond, time.Second)) {
				return
			}
			continue
		}
		fails = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "ssubscribe" {
				h.confirm(m.Channel)
			}
		case *redis.Message:
			h.wake(m.Channel, seqOf(m.Payload))
		}
	}
}

// resubscribe replaces the shard's PubSub with a new one that subscribes
// its channels one command each.
func (s *shard) resubscribe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	old := s.ps
	s.ps = s.client.SSubscribe(s.h.ctx)
	for ch := range s.chans {
		_ = s.ps.SSubscribe(s.h.ctx, ch)
	}
	_ = old.Close()
}

// confirm releases the Subscribe waiting for channel ch's confirmation.
func (h *Hub) confirm(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.entries[ch]; ok {
		e.confirm()
	}
}

// confirmShard releases every Subscribe waiting on shard s.
func (h *Hub) confirmShard(s *shard) {
	h.eachOf(s, func(e *entry) { e.confirm() })
}

// wakeShard wakes every Sub of shard s.
func (h *Hub) wakeShard(s *shard) {
	h.eachOf(s, func(e *entry) {
		for sub := range e.subs {
			sub.signal()
		}
	})
}

// eachOf runs f on every entry of shard s, under the hub's mutex.
func (h *Hub) eachOf(s *shard, f func(*entry)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		if e.shard == s {
			f(e)
		}
	}
}

// seqOf is an announced event's sequence number (-1 when unreadable:
// wake anyway).
func seqOf(payload string) int64 {
	var ev struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal([]byte(payload), &ev) != nil || ev.Seq <= 0 {
		return -1
	}
	return ev.Seq
}

// sleepCtx sleeps d unless ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
