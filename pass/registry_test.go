package pass

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
)

// Two passes of this test binary's own, registered with the registry the
// package's functions read: early runs second in the pipeline but is
// listed first in the file, late the other way round.
type earlyConfig struct {
	Enabled bool `yaml:"enabled"`
	Limit   int  `yaml:"limit"`
}

func (c earlyConfig) Validate() error {
	if c.Limit < 0 {
		return fmt.Errorf("limit: %d is negative", c.Limit)
	}
	return nil
}

type lateConfig struct {
	Enabled bool   `yaml:"enabled"`
	Mode    string `yaml:"mode"`
}

func (c lateConfig) Validate() error {
	if c.Mode == "bad" {
		return errors.New("mode: bad")
	}
	return nil
}

// fakePass is a compiled pass; closed counts its Close calls.
type fakePass struct {
	name   string
	closed int
}

func (p *fakePass) Name() string                                 { return p.name }
func (p *fakePass) Run(*pipeline.Request) ([]splice.Edit, error) { return nil, nil }
func (p *fakePass) Close()                                       { p.closed++ }

// plainPass has no background work.
type plainPass struct{ name string }

func (p plainPass) Name() string                                 { return p.name }
func (p plainPass) Run(*pipeline.Request) ([]splice.Edit, error) { return nil, nil }

// compiled counts the passes the late module built.
var compiled int

func init() {
	Register(Module[earlyConfig]{
		Name: "early", Key: "early_section", Order: 20, Listed: 1,
		Defaults: func() earlyConfig { return earlyConfig{Enabled: true, Limit: 3} },
		Enabled:  func(c *earlyConfig) *bool { return &c.Enabled },
		Compile: func(c earlyConfig, env Env) (pipeline.Pass, error) {
			if c.Limit == 99 {
				return plainPass{"misnamed"}, nil
			}
			return plainPass{"early"}, nil
		},
	})
	Register(Module[lateConfig]{
		Name: "late", Key: "late", Order: 10, Listed: 2,
		Defaults: func() lateConfig { return lateConfig{Enabled: true, Mode: "a"} },
		Enabled:  func(c *lateConfig) *bool { return &c.Enabled },
		Compile: func(c lateConfig, env Env) (pipeline.Pass, error) {
			if p, ok := env.Previous.(*fakePass); ok {
				return p, nil
			}
			if env.Blobs == nil {
				return nil, errors.New("late: no blobs")
			}
			compiled++
			return &fakePass{name: "late"}, nil
		},
		RestartOnly: []string{"mode"},
	})
}

func names(ps []pipeline.Pass) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return out
}

func TestModulesListed(t *testing.T) {
	var got []string
	for _, m := range Modules() {
		got = append(got, m.Key)
	}
	if d := cmp.Diff([]string{"early_section", "late"}, got); d != "" {
		t.Errorf("Modules by Listed (-want +got):\n%s", d)
	}
	m := Modules()
	m[1].RestartOnly[0] = "changed"
	if Modules()[1].RestartOnly[0] != "mode" {
		t.Error("Modules hands out the registry's own slice")
	}
}

func TestRegisterRefuses(t *testing.T) {
	ok := Module[earlyConfig]{
		Name: "a", Key: "a", Order: 1, Listed: 1,
		Defaults: func() earlyConfig { return earlyConfig{} },
		Enabled:  func(c *earlyConfig) *bool { return &c.Enabled },
		Compile:  func(earlyConfig, Env) (pipeline.Pass, error) { return nil, nil },
	}
	for _, tc := range []struct {
		name  string
		first bool // register ok first
		m     func(Module[earlyConfig]) Module[earlyConfig]
		want  string
	}{
		{"no name", false, func(m Module[earlyConfig]) Module[earlyConfig] { m.Name = ""; return m }, "required"},
		{"no compile", false, func(m Module[earlyConfig]) Module[earlyConfig] { m.Compile = nil; return m }, "required"},
		{"same name", true, func(m Module[earlyConfig]) Module[earlyConfig] { m.Key, m.Order, m.Listed = "b", 2, 2; return m }, "clashes"},
		{"same key", true, func(m Module[earlyConfig]) Module[earlyConfig] { m.Name, m.Order, m.Listed = "b", 2, 2; return m }, "clashes"},
		{"same order", true, func(m Module[earlyConfig]) Module[earlyConfig] { m.Name, m.Key, m.Listed = "b", "b", 2; return m }, "clashes"},
		{"same type", true, func(m Module[earlyConfig]) Module[earlyConfig] {
			m.Name, m.Key, m.Order, m.Listed = "b", "b", 2, 2
			return m
		}, "clashes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r registry
			if tc.first {
				register(&r, ok)
			}
			if got := panicked(func() { register(&r, tc.m(ok)) }); !strings.Contains(got, tc.want) {
				t.Errorf("panic %q, want one saying %q", got, tc.want)
			}
		})
	}
	late := Module[lateConfig]{
		Name: "b", Key: "b", Order: 2, Listed: 2,
		Defaults: func() lateConfig { return lateConfig{} },
		Enabled:  func(c *lateConfig) *bool { return &c.Enabled },
		Compile:  func(lateConfig, Env) (pipeline.Pass, error) { return nil, nil },
	}
	var r registry
	register(&r, ok)
	r.modules()
	if got := panicked(func() { register(&r, late) }); !strings.Contains(got, "after the registry was read") {
		t.Errorf("Register after a read: panic %q", got)
	}
	var r2 registry
	if got := panicked(func() {
		register(&r2, Module[scalarSection]{
			Name: "s", Key: "s", Defaults: func() scalarSection { return 0 },
			Enabled: func(*scalarSection) *bool { return new(bool) },
			Compile: func(scalarSection, Env) (pipeline.Pass, error) { return nil, nil },
		})
	}); !strings.Contains(got, "not a struct") {
		t.Errorf("a section that is not a struct: panic %q", got)
	}
}

// scalarSection is a Section that is not a struct.
type scalarSection int

func (scalarSection) Validate() error { return nil }

// panicked runs f and returns what it panicked with, or "".
func panicked(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestSectionsAreValues: Sections copied with a Config never see each
// other's changes.
func TestSectionsAreValues(t *testing.T) {
	a := Defaults()
	b := a
	Update(&b, func(c *earlyConfig) { c.Limit = 7 })
	if err := b.Switch("late", false); err != nil {
		t.Fatal(err)
	}
	if Get[earlyConfig](a).Limit != 3 || !a.Enabled("late") {
		t.Errorf("a copy's change reached the original: %+v, late on %v", Get[earlyConfig](a), a.Enabled("late"))
	}
	if Get[earlyConfig](b).Limit != 7 || b.Enabled("late") {
		t.Errorf("the copy lost its change: %+v, late on %v", Get[earlyConfig](b), b.Enabled("late"))
	}
	var zero Sections
	if got := Get[lateConfig](zero); got != (lateConfig{}) {
		t.Errorf("a missing section is %+v, not the zero value", got)
	}
	Set(&zero, lateConfig{Mode: "x"})
	if v, ok := zero.Lookup("late"); !ok || v.(lateConfig).Mode != "x" {
		t.Errorf("Lookup after Set: %v %v", v, ok)
	}
	if _, ok := zero.Lookup("nope"); ok {
		t.Error("Lookup of a key no pass has")
	}
	if err := zero.Store("late", earlyConfig{}); err == nil {
		t.Error("Store of the wrong type")
	}
	if err := zero.Store("nope", earlyConfig{}); err == nil {
		t.Error("Store of a key no pass has")
	}
	if err := zero.Switch("nope", true); err == nil || zero.Enabled("nope") {
		t.Error("Switch of a name no pass has")
	}
	if got := panicked(func() { Get[struct{ Section }](a) }); !strings.Contains(got, "not the section of a registered pass") {
		t.Errorf("Get of an unregistered type: panic %q", got)
	}
}

func TestValidate(t *testing.T) {
	s := Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	Update(&s, func(c *lateConfig) { c.Mode = "bad" })
	Update(&s, func(c *earlyConfig) { c.Limit = -1 })
	want := "early_section: limit: -1 is negative\nlate: mode: bad"
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

func TestCompile(t *testing.T) {
	blobs := &store.Blobs{Store: store.NewMemory()}
	s := Defaults()
	b, err := Compile(s, Env{Blobs: blobs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"late", "early"}, names(b.Passes())); d != "" {
		t.Errorf("pipeline order (-want +got):\n%s", d)
	}
	late := b.Passes()[0].(*fakePass)

	// A reload that leaves late's section and the env alone keeps it.
	s2 := s
	Update(&s2, func(c *earlyConfig) { c.Limit = 4 })
	b2, err := Compile(s2, Env{Blobs: blobs}, b)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Passes()[0] != late {
		t.Error("an unchanged section's pass was rebuilt")
	}
	if got := b.Closers(b2); len(got) != 0 {
		t.Errorf("closers of a kept pass: %v", got)
	}
	// Another store: rebuilt, and the old one is to be closed.
	b3, err := Compile(s2, Env{Blobs: &store.Blobs{Store: store.NewMemory()}}, b2)
	if err != nil {
		t.Fatal(err)
	}
	if b3.Passes()[0] == late {
		t.Error("a pass was kept across a change of Blobs")
	}
	if got := b2.Closers(b3); len(got) != 1 || got[0] != late {
		t.Errorf("closers after a replacement: %v", got)
	}
	// A changed section: rebuilt.
	s4 := s2
	Update(&s4, func(c *lateConfig) { c.Mode = "b" })
	before := compiled
	b4, err := Compile(s4, Env{Blobs: blobs}, b2)
	if err != nil || compiled != before+1 || b4.Passes()[0] == late {
		t.Errorf("a changed section: err %v, compiled %d times", err, compiled-before)
	}
	// Switched off: not compiled.
	s5 := s
	s5.Switch("late", false)
	if b5, err := Compile(s5, Env{Blobs: blobs}, nil); err != nil || len(b5.Passes()) != 1 || b5.Passes()[0].Name() != "early" {
		t.Errorf("late off: %v, %v", err, b5)
	}
	if cl := b4.Closers(nil); len(cl) != 1 {
		t.Errorf("Closers(nil) = %v, want the one pass that closes", cl)
	}
	// A module's error, and a pass named otherwise than its module.
	if _, err := Compile(s, Env{}, nil); err == nil || !strings.Contains(err.Error(), "no blobs") {
		t.Errorf("compile error: %v", err)
	}
	s6 := s
	Update(&s6, func(c *earlyConfig) { c.Limit = 99 })
	if _, err := Compile(s6, Env{Blobs: blobs}, nil); err == nil || !strings.Contains(err.Error(), `"misnamed"`) {
		t.Errorf("misnamed pass: %v", err)
	}
}

// uncomparable is a value == would panic on (a Summarizer may be one).
type uncomparable struct{ m map[string]int }

func TestSame(t *testing.T) {
	a, b := &fakePass{}, &fakePass{}
	for _, tc := range []struct {
		x, y any
		want bool
	}{
		{nil, nil, true}, {a, a, true}, {a, b, false}, {a, nil, false},
		{uncomparable{}, uncomparable{}, false},
	} {
		if got := same(tc.x, tc.y); got != tc.want {
			t.Errorf("same(%v, %v) = %v", tc.x, tc.y, got)
		}
	}
}
