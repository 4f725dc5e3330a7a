package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/store"
	redisstore "github.com/ctxguard/ctxguard/store/redis"
)

// OpenStore opens the store cfg names: the shared (Redis) store of
// cfg.Store, which must answer now (see openShared), or else the embedded
// store under cfg.DataDir (see store.OpenDir: created private if absent,
// adopted if empty, refused if it holds files that are not ctxguard's).
// If the data directory cannot be written (store.ErrNotWritable), it is
// the memory store: removed content is kept in memory, at most
// cfg.Limits.MemoryStore bytes, for cfg.BlobTTL after its last use, and
// lost on exit; a warning says so. now is the clock of the embedded and
// memory stores (nil: time.Now).
func OpenStore(cfg config.Config, log *slog.Logger, now func() time.Time) (store.Store, error) {
	if now == nil {
		now = time.Now
	}
	if cfg.Store != "" {
		return openShared(cfg, log, now)
	}
	d, err := store.OpenDir(cfg.DataDir, cfg.BlobTTL)
	if err == nil {
		d.Now = now
		for _, w := range d.Warnings() {
			log.Warn(w)
		}
		return d, nil
	}
	if !errors.Is(err, store.ErrNotWritable) {
		return nil, err
	}
	limit := "at most " + strconv.FormatFloat(float64(cfg.Limits.MemoryStore)/(1<<20), 'f', -1, 64) + " MiB"
	log.Warn("the data dir "+cfg.DataDir+" cannot be written; serving without persistence: removed content is kept in memory only, "+limit+", and lost on exit",
		"data_dir", cfg.DataDir, "reason", err, "memory_store", cfg.Limits.MemoryStore)
	return store.NewMemoryWith(store.MemoryOptions{MaxBytes: cfg.Limits.MemoryStore, TTL: cfg.BlobTTL, Now: now}), nil
}

// openShared opens the Redis store cfg.Store names, with the password
// from the environment (config.RedisPasswordEnv). A server that does not
// answer at start is an error naming the URL without credentials: ctxguard
// does not start on a store it cannot reach. Later outages: the store is
// wrapped in a store.Breaker, so that once it is known to be down (a call
// timed out, or /readyz found it down) requests fail open at once instead
// of waiting for it, until a probe finds it back.
func openShared(cfg config.Config, log *slog.Logger, now func() time.Time) (store.Store, error) {
	pw := os.Getenv(config.RedisPasswordEnv)
	redisstore.SetLogger(log)
	ctx, cancel := store.CallContext()
	defer cancel()
	s, err := redisstore.Open(ctx, redisstore.Options{URL: cfg.Store, Password: pw, TTL: cfg.BlobTTL, MaxBlob: cfg.Limits.StoreBlob})
	if errors.Is(err, redisstore.ErrAuth) {
		set := "is not set"
		if pw != "" {
			set = "is set, but the server refused it"
		}
		return nil, fmt.Errorf("store: %w (the password comes from %s, which %s)", err, config.RedisPasswordEnv, set)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	log.Info("shared store", "store", s.String())
	if cfg.PublicURL == "" {
		log.Warn("the store is shared but public_url is empty: stubs name this instance's own address, so instances sharing the store send different bytes for the same content; set public_url to the address clients reach every instance at",
			"store", s.String())
	}
	name := s.String()
	return store.NewBreaker(s, store.BreakerOptions{Now: now, OnChange: func(err error) {
		if err != nil {
			log.Warn("the store does not answer: requests fail open without waiting for it until it answers again", "store", name, "err", err)
			return
		}
		log.Info("the store answers again", "store", name)
	}}), nil
}
