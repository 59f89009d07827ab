package config

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url      string
		sentinel *Sentinel
		cluster  *Cluster
		err      string
	}{
		{url: "redis+sentinel://:pw@h1:26379,h2:26379/mymaster/0",
			sentinel: &Sentinel{MasterName: "mymaster", Addrs: []string{"h1:26379", "h2:26379"}, Password: "pw"}},
		{url: "redis+sentinel://h1:26379/mymaster/3?sentinel_password=s%40cret",
			sentinel: &Sentinel{MasterName: "mymaster", Addrs: []string{"h1:26379"}, DB: 3, SentinelPassword: "s@cret"}},
		{url: "redis+sentinel://user:p%3Aw@h1:26379/m",
			sentinel: &Sentinel{MasterName: "m", Addrs: []string{"h1:26379"}, Password: "p:w"}},
		{url: "redis+cluster://:pw@h1:7000,h2:7000", cluster: &Cluster{Addrs: []string{"h1:7000", "h2:7000"}, Password: "pw"}},
		{url: "redis+cluster://127.0.0.1:7000/", cluster: &Cluster{Addrs: []string{"127.0.0.1:7000"}}},
		{url: "redis+sentinel://h1:26379", err: "no master name"},
		{url: "redis+sentinel://h1:26379/m/x", err: `database "x"`},
		{url: "redis+sentinel://h1:26379/m/0/1", err: "more than MASTER_NAME/DB"},
		{url: "redis+sentinel://h1:26379/m?foo=1", err: `unknown query parameter "foo"`},
		{url: "redis+cluster://h1:7000/0", err: "no path"},
		{url: "redis+cluster://", err: "no host:port"},
		{url: "redis+cluster://h1", err: `address "h1" is not host:port`},
		{url: "redis://h1:6379", err: "not a redis+sentinel"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			s, c, err := ParseRedisURL(tt.url)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				require.NotContains(t, err.Error(), "pw")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.sentinel, s)
			require.Equal(t, tt.cluster, c)
		})
	}
}

func TestRedisBlocks(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
redis:
  sentinel:
    master_name: mymaster
    addrs: [s1:26379, s2:26379, s3:26379]
    password: ${REDIS_PASSWORD}
    sentinel_password: ${SENTINEL_PASSWORD}
    db: 2
  wait_replicas: 1
  wait_timeout: 2s
worker:
  queues: {default: 1, llm: 2}
agents:
  llm:
    http: {url: https://llm.example/v1}
    queue: llm
  tool:
    exec: {command: [x]}
`), "a.yaml")
	require.NoError(t, err)
	require.Empty(t, c.Redis.URL, "a sentinel block replaces the seed URL")
	require.Equal(t, &Sentinel{MasterName: "mymaster", Addrs: []string{"s1:26379", "s2:26379", "s3:26379"},
		Password: "${REDIS_PASSWORD}", SentinelPassword: "${SENTINEL_PASSWORD}", DB: 2}, c.Redis.Sentinel)
	require.Equal(t, 1, c.Redis.WaitReplicas)
	require.Equal(t, "2s", c.Redis.WaitTimeout.String())
	require.Equal(t, "llm", c.AgentQueue("llm"))
	require.Equal(t, "default", c.AgentQueue("tool"))
	require.Equal(t, "default", c.AgentQueue("unknown"))
	require.Equal(t, `sentinel master "mymaster" via s1:26379,s2:26379,s3:26379`, c.Redis.Where())

	// The environment's URL replaces the whole location, whatever the file's topology.
	c.ApplyEnv(func(k string) string {
		if k == EnvRedisURL {
			return "redis+cluster://:secret@h1:7000,h2:7000"
		}
		return ""
	})
	require.NoError(t, c.Validate())
	require.Nil(t, c.Redis.Sentinel)
	r, err := c.Redis.Resolved()
	require.NoError(t, err)
	require.Nil(t, r.Sentinel)
	require.Equal(t, &Cluster{Addrs: []string{"h1:7000", "h2:7000"}, Password: "secret"}, r.Cluster)
	require.Equal(t, "redis+cluster://***@h1:7000,h2:7000", c.Redis.Where())
}

func TestNewClientTopologies(t *testing.T) {
	t.Parallel()
	env := func(k string) string { return map[string]string{"PW": "from-env"}[k] }
	rdb, err := Redis{URL: "redis://127.0.0.1:1/0"}.NewClient(env)
	require.NoError(t, err)
	require.IsType(t, &redis.Client{}, rdb)
	require.NoError(t, rdb.Close())

	rdb, err = Redis{Cluster: &Cluster{Addrs: []string{"127.0.0.1:1"}, Password: "${PW}"}}.NewClient(env)
	require.NoError(t, err)
	cc, ok := rdb.(*redis.ClusterClient)
	require.True(t, ok)
	require.Equal(t, "from-env", cc.Options().Password)
	require.NoError(t, rdb.Close())

	rdb, err = Redis{URL: "redis+sentinel://:${PW}@127.0.0.1:1/m"}.NewClient(env)
	require.NoError(t, err)
	require.IsType(t, &redis.Client{}, rdb, "a Sentinel failover client is a *redis.Client")
	require.NoError(t, rdb.Close())

	_, err = Redis{URL: "redis+sentinel://127.0.0.1:1"}.NewClient(env)
	require.ErrorContains(t, err, "no master name")
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "redis://***@h:1/0", RedactURL("redis://u:pw@h:1/0"))
	require.Equal(t, "redis+sentinel://***@h:1,h2:2/m/0?…", RedactURL("redis+sentinel://:pw@h:1,h2:2/m/0?sentinel_password=x"))
	require.Equal(t, "redis://h:1/0", RedactURL("redis://h:1/0"))
}
