package ctxguard

import (
	"errors"
	"fmt"
	"os"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/store"
	redisstore "github.com/ctxguard/ctxguard/store/redis"
)

// openShared opens the Redis store cfg.Store names, with the password
// from the environment (config.RedisPasswordEnv). A server that does not
// answer at start is an error naming the URL without credentials: ctxguard
// does not start on a store it cannot reach. Later outages: the store is
// wrapped in a store.Breaker, so that once it is known to be down (a call
// timed out, or /readyz found it down) requests fail open at once instead
// of waiting for it, until a probe finds it back.
func (g *Guard) openShared() (store.Store, error) {
	cfg := g.cfg
	pw := os.Getenv(config.RedisPasswordEnv)
	redisstore.SetLogger(g.log)
	ctx, cancel := storeContext()
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
	g.log.Info("shared store", "store", s.String())
	if cfg.PublicURL == "" {
		g.log.Warn("the store is shared but public_url is empty: stubs name this instance's own address, so instances sharing the store send different bytes for the same content; set public_url to the address clients reach every instance at",
			"store", s.String())
	}
	name := s.String()
	return store.NewBreaker(s, store.BreakerOptions{Now: g.now, OnChange: func(err error) {
		if err != nil {
			g.log.Warn("the store does not answer: requests fail open without waiting for it until it answers again", "store", name, "err", err)
			return
		}
		g.log.Info("the store answers again", "store", name)
	}}), nil
}
