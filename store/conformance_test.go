package store_test

import (
	"testing"

	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

func TestConformanceDir(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		return storetest.TempDir(t, c.TTL, c.Now)
	})
}

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		return store.NewMemoryWith(store.MemoryOptions{TTL: c.TTL, Now: c.Now})
	})
}

// A cap far above what the suite stores changes nothing it checks.
func TestConformanceMemoryCapped(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		return store.NewMemoryWith(store.MemoryOptions{MaxBytes: 64 << 20, TTL: c.TTL, Now: c.Now})
	})
}
