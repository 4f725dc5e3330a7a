package pass

import (
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/ctxguard/ctxguard/pipeline"
)

// Built is what Compile built: the passes a configuration switches on, in
// pipeline order, with the sections and Env they were built from.
type Built struct {
	passes   []pipeline.Pass
	byKey    map[string]pipeline.Pass
	sections Sections
	env      Env
}

// Compile builds the passes that s switches on, in Order, each by its
// module with env. s must be valid (Sections.Validate). prev, when not
// nil, is what Compile built for the configuration a reload replaces: a
// module whose section is unchanged, under an env with the same Blobs and
// Summarizer, gets the pass it built then as env.Previous.
func Compile(s Sections, env Env, prev *Built) (*Built, error) {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	b := &Built{byKey: make(map[string]pipeline.Pass), sections: s, env: env}
	sameEnv := prev != nil && prev.env.Blobs == env.Blobs && same(prev.env.Summarizer, env.Summarizer)
	for _, m := range std.pipelineOrder() {
		c, _ := s.Lookup(m.Key)
		if !m.enabled(c) {
			continue
		}
		e := env
		if sameEnv {
			if old, ok := prev.sections.Lookup(m.Key); ok && reflect.DeepEqual(old, c) {
				e.Previous = prev.byKey[m.Key]
			}
		}
		p, err := m.compile(c, e)
		if err != nil {
			return nil, err
		}
		if p.Name() != m.Name {
			return nil, fmt.Errorf("pass: the module %q compiled a pass named %q", m.Name, p.Name())
		}
		b.passes = append(b.passes, p)
		b.byKey[m.Key] = p
	}
	return b, nil
}

// Passes returns the passes, in pipeline order.
func (b *Built) Passes() []pipeline.Pass { return b.passes }

// Closer is a pass with background work to stop (the summaries compaction
// is writing): its owner calls Close when no pipeline runs it any more.
type Closer interface {
	Close()
}

// Closers returns b's passes that have background work to stop, in
// pipeline order; with next, the Built that replaces b, only those next
// does not run.
func (b *Built) Closers(next *Built) []Closer {
	var out []Closer
	for _, p := range b.passes {
		c, ok := p.(Closer)
		if !ok {
			continue
		}
		if next != nil && next.runs(p) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// runs reports whether p is one of b's passes.
func (b *Built) runs(p pipeline.Pass) bool {
	for _, q := range b.passes {
		if q == p {
			return true
		}
	}
	return false
}

// same reports whether a and b are the same value, false when they cannot
// be compared (a Summarizer of a type == panics on).
func same(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}
