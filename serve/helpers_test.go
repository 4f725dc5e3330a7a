package serve

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/engine"
	"github.com/ctxguard/ctxguard/observe"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// protocols are the APIs ctxguard speaks, as a Guard gives them.
var protocols = []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol}

// option adjusts the engine's Options newServer builds with.
type option func(*engine.Options)

func withStore(s store.Store) option          { return func(o *engine.Options) { o.Store = s } }
func withSummarizer(s pass.Summarizer) option { return func(o *engine.Options) { o.Summarizer = s } }
func withClock(now func() time.Time) option   { return func(o *engine.Options) { o.Now = now } }

// newServer wires a Server for cfg as a Guard does: paths expanded,
// validated, the store OpenStore opens in a fresh data directory unless
// withStore gave one, the standard observers subscribed. Everything is
// closed when the test ends.
func newServer(t testing.TB, cfg config.Config, opts ...option) *Server {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if err := cfg.ExpandPaths(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o := engine.Options{Protocols: protocols, Log: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	if o.Store == nil {
		st, err := OpenStore(cfg, o.Log, o.Now)
		if err != nil {
			t.Fatal(err)
		}
		o.Store = st
	}
	o.Calibration = observe.LoadCalibration(o.Store, o.Log)
	e, err := engine.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.NewSet(o.Store, e.Calibration(), o.Log)
	obs.Subscribe(e.Records())
	s := New(e, obs, protocols)
	t.Cleanup(func() {
		e.Close()
		s.Flush()
		o.Store.Close()
	})
	return s
}

// blockingSummarizer never has a summary ready: compaction then sends
// the extractive one.
type blockingSummarizer struct{}

func (blockingSummarizer) Summarize(ctx context.Context, _ *pass.Job) (pass.Summary, error) {
	<-ctx.Done()
	return pass.Summary{}, ctx.Err()
}

// longSession is a generated Claude Code session of 300 turns, long
// enough to overflow a window a test makes small.
func longSession(t testing.TB) [][]byte {
	t.Helper()
	gen, err := sessiongen.Generate(rand.New(rand.NewPCG(0, 11)), sessiongen.Options{Turns: 300, MaxResult: 8_000, Protocol: anthropic.Protocol.Name()})
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := gen.Requests()
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	for _, r := range reqs {
		bodies = append(bodies, r.Body)
	}
	return bodies
}

// serveProxy serves the proxy (Handler) for cfg in front of a fake
// upstream.
func serveProxy(t *testing.T, cfg config.Config) (*Server, *httptest.Server, *anthropictest.Server) {
	t.Helper()
	up := anthropictest.NewServer(anthropictest.Options{})
	t.Cleanup(up.Close)
	cfg.Upstreams = config.AllUpstreams(up.URL)
	s := newServer(t, cfg)
	h, err := s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return s, srv, up
}
