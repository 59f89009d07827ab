package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The URL schemes of the three topologies. A redis:// (rediss://, unix://)
// URL names one server; a redis+sentinel:// URL names a Sentinel group:
//
//	redis+sentinel://[[user]:password@]host:port[,host:port…]/MASTER_NAME[/DB][?sentinel_password=…]
//
// (the password is the data nodes'; the sentinels' goes in the query), and
// a redis+cluster:// URL names seed nodes of a Cluster:
//
//	redis+cluster://[[user]:password@]host:port[,host:port…]
const (
	SchemeSentinel = "redis+sentinel"
	SchemeCluster  = "redis+cluster"
)

// Resolved returns r with a redis+sentinel:// or redis+cluster:// URL
// turned into its Sentinel or Cluster block (URL then empty); any other r
// is returned as it is. A malformed URL is an error naming what is wrong
// (never the password).
func (r Redis) Resolved() (Redis, error) {
	scheme, _, _ := strings.Cut(r.URL, "://")
	switch scheme {
	case SchemeSentinel, SchemeCluster:
	default:
		return r, nil
	}
	s, c, err := ParseRedisURL(r.URL)
	if err != nil {
		return r, err
	}
	r.URL, r.Sentinel, r.Cluster = "", s, c
	return r, nil
}

// ParseRedisURL parses a redis+sentinel:// URL into a Sentinel block or a
// redis+cluster:// URL into a Cluster block (the other is nil).
func ParseRedisURL(raw string) (*Sentinel, *Cluster, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != SchemeSentinel && scheme != SchemeCluster) {
		return nil, nil, fmt.Errorf("not a %s:// or %s:// URL", SchemeSentinel, SchemeCluster)
	}
	var query string
	rest, query, _ = strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	var password string
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		userinfo := hosts[:i]
		hosts = hosts[i+1:]
		if _, pw, ok := strings.Cut(userinfo, ":"); ok {
			p, err := url.PathUnescape(pw)
			if err != nil {
				return nil, nil, errors.New("the password is not valid URL escaping")
			}
			password = p
		}
	}
	addrs, err := splitAddrs(hosts)
	if err != nil {
		return nil, nil, err
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, nil, fmt.Errorf("bad query: %v", err)
	}
	if scheme == SchemeCluster {
		if strings.Trim(path, "/") != "" {
			return nil, nil, errors.New("a cluster URL has no path (a Cluster has one database, 0)")
		}
		if len(q) > 0 {
			return nil, nil, fmt.Errorf("unknown query parameter %q", firstKey(q))
		}
		return nil, &Cluster{Addrs: addrs, Password: password}, nil
	}
	s := &Sentinel{Addrs: addrs, Password: password}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if parts[0] == "" {
		return nil, nil, errors.New("no master name: write redis+sentinel://host:port,…/MASTER_NAME/DB")
	}
	s.MasterName = parts[0]
	if len(parts) > 2 {
		return nil, nil, errors.New("path has more than MASTER_NAME/DB")
	}
	if len(parts) == 2 && parts[1] != "" {
		db, err := strconv.Atoi(parts[1])
		if err != nil || db < 0 {
			return nil, nil, fmt.Errorf("database %q is not a number ≥ 0", parts[1])
		}
		s.DB = db
	}
	for k, v := range q {
		if k != "sentinel_password" {
			return nil, nil, fmt.Errorf("unknown query parameter %q (known: sentinel_password)", k)
		}
		s.SentinelPassword = v[len(v)-1]
	}
	return s, nil, nil
}

func firstKey(q url.Values) string {
	for k := range q {
		return k
	}
	return ""
}

// splitAddrs splits "h1:p1,h2:p2" and checks each is host:port.
func splitAddrs(hosts string) ([]string, error) {
	if hosts == "" {
		return nil, errors.New("no host:port addresses")
	}
	var out []string
	for _, a := range strings.Split(hosts, ",") {
		if err := checkAddr(a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// checkAddr checks that a is host:port with a port in 1..65535.
func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return fmt.Errorf("address %q is not host:port", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("address %q: port is not a number in 1..65535", a)
	}
	return nil
}

// Client settings every agentq process uses.
const (
	dialTimeout        = 3 * time.Second
	defaultReadTimeout = 3 * time.Second
	clusterReload      = time.Second
)

// NewClient opens a client for r (after Resolved): a *redis.Client for a
// URL, a failover client (Sentinel) or a *redis.ClusterClient. Passwords'
// ${VAR} are read with getenv (nil: none are expanded). Socket reads
// follow context deadlines, so a server that stops answering holds a call
// only as long as its context allows. It does not check that Redis
// answers.
func (r Redis) NewClient(getenv func(string) string) (redis.UniversalClient, error) {
	r, err := r.Resolved()
	if err != nil {
		return nil, err
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	// A WAIT holds its connection for up to wait_timeout: reads must
	// outlast it.
	readTimeout := max(defaultReadTimeout, r.WaitTimeout+time.Second)
	switch {
	case r.Sentinel != nil:
		s := r.Sentinel
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: s.MasterName, SentinelAddrs: s.Addrs, DB: s.DB,
			Password:         expandBraced(s.Password, getenv),
			SentinelPassword: expandBraced(s.SentinelPassword, getenv),
			DialTimeout:      dialTimeout, ReadTimeout: readTimeout, ContextTimeoutEnabled: true,
		}), nil
	case r.Cluster != nil:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: r.Cluster.Addrs, Password: expandBraced(r.Cluster.Password, getenv),
			DialTimeout: dialTimeout, ReadTimeout: readTimeout, ContextTimeoutEnabled: true,
			// A killed master never answers with a redirect: without a
			// periodic reload the client would dial it for a minute
			// (go-redis' default) before it learns of the promotion.
			ClusterStateReloadInterval: clusterReload,
		}), nil
	}
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, err
	}
	opt.DialTimeout = dialTimeout
	opt.ReadTimeout = max(opt.ReadTimeout, readTimeout)
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// Where describes r for messages and logs: the URL with its password
// hidden, or the topology and its addresses; never a password.
func (r Redis) Where() string {
	switch {
	case r.Sentinel != nil:
		return fmt.Sprintf("sentinel master %q via %s", r.Sentinel.MasterName, strings.Join(r.Sentinel.Addrs, ","))
	case r.Cluster != nil:
		return "cluster " + strings.Join(r.Cluster.Addrs, ",")
	}
	return RedactURL(r.URL)
}

// RedactURL hides the password of a Redis URL, and its query (which may
// hold sentinel_password).
func RedactURL(u string) string {
	if q := strings.IndexByte(u, '?'); q >= 0 {
		u = u[:q] + "?…"
	}
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if j := strings.LastIndex(rest[:end], "@"); j >= 0 {
			return u[:i+3] + "***@" + rest[j+1:]
		}
	}
	return u
}
