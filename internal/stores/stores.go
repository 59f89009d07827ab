// Package stores assembles the set of stores the HTTP API (internal/api)
// and the web console (internal/console) read and write, the same way for
// both: the producer's client and its task store, the dead-letter store,
// the breakers, the budgets and the notification hubs.
package stores

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// Options configure a Set. Zero values build the set's own.
type Options struct {
	// Client enqueues, cancels and requeues. Zero: tasks.NewClient(rdb,
	// cfg.ClientOptions()...).
	Client *tasks.Client
	// Breakers reads the agents' breakers. Zero: breaker.New(rdb) with
	// RedisTimeout as its call timeout and Logger.
	Breakers *breaker.Breakers
	// Notifier is a hub to share; zero: the set's own, made on first use.
	Notifier *notify.Hub
	// RedisTimeout bounds a breaker call.
	RedisTimeout time.Duration
	// Logger logs the breakers' and the hubs' failures.
	Logger *slog.Logger
}

// Set is the stores of one Redis and one configuration, with the Redis and
// the configuration themselves. internal/api's Server and
// internal/console's Console embed it.
type Set struct {
	Redis       redis.UniversalClient
	Config      *config.Config
	Client      *tasks.Client
	Tasks       *tasks.Store
	DeadLetters *deadletter.Store
	Breakers    *breaker.Breakers
	Budgets     *budget.Keeper
	Hubs        *notify.Lazy
}

// New returns the set on rdb and cfg (nil: config.Default()).
func New(rdb redis.UniversalClient, cfg *config.Config, opts Options) Set {
	if cfg == nil {
		cfg = config.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Client == nil {
		opts.Client = tasks.NewClient(rdb, cfg.ClientOptions()...)
	}
	if opts.Breakers == nil {
		opts.Breakers = breaker.New(rdb, breaker.WithCallTimeout(opts.RedisTimeout), breaker.WithLogger(opts.Logger))
	}
	store := opts.Client.Store()
	return Set{
		Redis: rdb, Config: cfg,
		Client: opts.Client, Tasks: store, Breakers: opts.Breakers,
		DeadLetters: deadletter.NewStore(rdb),
		Budgets:     budget.New(rdb),
		Hubs:        notify.NewLazy(opts.Notifier, rdb, record.StoreOf(store), notify.Options{Logger: opts.Logger}),
	}
}
