package engine

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
)

// protocols are the APIs ctxguard speaks, as a Guard gives them.
var protocols = []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol}

// option adjusts the Options newEngine builds an Engine with.
type option func(*Options)

func withStore(s store.Store) option          { return func(o *Options) { o.Store = s } }
func withSummarizer(s pass.Summarizer) option { return func(o *Options) { o.Summarizer = s } }
func withClock(now func() time.Time) option   { return func(o *Options) { o.Now = now } }
func withLogger(l *slog.Logger) option        { return func(o *Options) { o.Log = l } }

// newEngine builds an Engine for cfg as a Guard does: its paths expanded,
// validated, the embedded store in a fresh directory unless withStore
// gave one. The Engine and its store are closed when the test ends.
func newEngine(t testing.TB, cfg config.Config, opts ...option) *Engine {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if err := cfg.ExpandPaths(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o := Options{Protocols: protocols}
	for _, f := range opts {
		f(&o)
	}
	if o.Store == nil {
		d, err := store.OpenDir(cfg.DataDir, cfg.BlobTTL)
		if err != nil {
			t.Fatal(err)
		}
		if o.Now != nil {
			d.Now = o.Now
		}
		o.Store = d
	}
	e, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		o.Store.Close()
	})
	return e
}
