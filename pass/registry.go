// Package pass is where the pipeline's passes plug into ctxguard, as
// Caddy's modules do: each pass package registers itself here (Register)
// with its name, the YAML key of its configuration section, its place in
// the pipeline and in the configuration file, its defaults, how to switch
// it on and off, how to compile it, and which of its settings only a
// restart changes. The rest of ctxguard reaches passes through this
// registry only:
//
//   - package config decodes, validates and prints the sections by key
//     (Sections, Modules) and never imports a pass;
//   - the engine compiles the pipeline from the registry (Compile), in
//     Order, giving every pass the same Env.
//
// A pass package registers in its init function, so registration happens
// when the package is linked in. Package pass/all imports every pass
// ctxguard ships; the engine (package ctxguard) imports pass/all, so the
// library and the binary both have them, and so do tests of packages that
// decode configuration without the engine. A program that links a pass
// of its own registers it the same way, before it first loads a
// configuration.
//
// The registry is read-only once it is first read (Modules, Defaults,
// Get, Compile, ...): a Register after that panics, so that a
// configuration decoded early can never miss a section registered late.
package pass

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/ctxguard/ctxguard/pipeline"
)

// Section is a pass's configuration: a struct decoded from the pass's
// YAML section, which Validate checks on its own (it reports every
// problem, joined; config prefixes them with the section's key).
type Section interface {
	Validate() error
}

// Module describes a pass for Register. T is its configuration section's
// type, which identifies the module for Get, Set and Update: no two
// modules share one.
type Module[T Section] struct {
	// Name is the pass's name: pipeline.Pass.Name of what Compile
	// returns, in logs, headers, records and replays ("clear").
	Name string
	// Key is the YAML key of its configuration section
	// ("thinking_guard").
	Key string
	// Order is its place in the pipeline: passes run in increasing
	// Order. Two modules never share one.
	Order int
	// Listed is its section's place in the configuration file, as
	// `ctxguard config` prints it: after the settings of package config,
	// sections follow in increasing Listed. Two modules never share one.
	Listed int
	// Defaults returns the section ctxguard runs with when the file sets
	// none: every default written out, so that `ctxguard config` shows
	// it.
	Defaults func() T
	// Enabled returns the switch of the section at c (its enabled key):
	// Compile skips a pass switched off, and Sections.Switch turns
	// passes off by name.
	Enabled func(c *T) *bool
	// Compile builds the pass that c (validated, switched on) describes,
	// with env.
	Compile func(c T, env Env) (pipeline.Pass, error)
	// RestartOnly are the keys of settings of the section, relative to
	// it and dotted ("ttl"), that a running ctxguard cannot change: a
	// reload keeps their running values (config.KeepRestartOnly).
	RestartOnly []string
}

// Info describes a registered pass to code that handles every section
// alike (package config, replays).
type Info struct {
	// Name, Key, Order, Listed and RestartOnly are the Module's.
	Name, Key     string
	Order, Listed int
	RestartOnly   []string
	// Type is the type of its configuration section.
	Type reflect.Type
}

// module is a registered Module with its type erased.
type module struct {
	Info
	defaults func() any
	validate func(any) error
	enabled  func(any) bool
	setOn    func(any, bool) any
	compile  func(any, Env) (pipeline.Pass, error)
}

// registry holds the modules. std is the one ctxguard uses; tests make
// their own.
type registry struct {
	mu     sync.Mutex
	frozen bool
	mods   []*module // by Listed
	byType map[reflect.Type]*module
}

var std registry

// Register adds the pass m describes to the registry. It panics when a
// field is missing, when T is not a struct, when the name, key, config
// type, Order or Listed of another module is m's, or once the registry
// has been read: Register is for init functions.
func Register[T Section](m Module[T]) { register(&std, m) }

func register[T Section](r *registry, m Module[T]) {
	t := reflect.TypeFor[T]()
	if m.Name == "" || m.Key == "" || m.Defaults == nil || m.Enabled == nil || m.Compile == nil {
		panic(fmt.Sprintf("pass: Register %q (%v): Name, Key, Defaults, Enabled and Compile are required", m.Name, t))
	}
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("pass: Register %q: its section %v is not a struct", m.Name, t))
	}
	mod := &module{
		Info:     Info{Name: m.Name, Key: m.Key, Order: m.Order, Listed: m.Listed, RestartOnly: slices.Clone(m.RestartOnly), Type: t},
		defaults: func() any { return m.Defaults() },
		validate: func(c any) error { return c.(T).Validate() },
		enabled: func(c any) bool {
			v := c.(T)
			return *m.Enabled(&v)
		},
		setOn: func(c any, on bool) any {
			v := c.(T)
			*m.Enabled(&v) = on
			return v
		},
		compile: func(c any, env Env) (pipeline.Pass, error) { return m.Compile(c.(T), env) },
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		panic(fmt.Sprintf("pass: Register %q after the registry was read", m.Name))
	}
	for _, o := range r.mods {
		if o.Name == m.Name || o.Key == m.Key || o.Type == t || o.Order == m.Order || o.Listed == m.Listed {
			panic(fmt.Sprintf("pass: Register %q (key %q, %v, order %d, listed %d) clashes with %q (key %q, %v, order %d, listed %d)",
				m.Name, m.Key, t, m.Order, m.Listed, o.Name, o.Key, o.Type, o.Order, o.Listed))
		}
	}
	if r.byType == nil {
		r.byType = make(map[reflect.Type]*module)
	}
	r.byType[t] = mod
	r.mods = append(r.mods, mod)
	slices.SortFunc(r.mods, func(a, b *module) int { return cmp.Compare(a.Listed, b.Listed) })
}

// modules returns the registered modules by Listed and freezes the
// registry.
func (r *registry) modules() []*module {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
	return r.mods
}

// pipelineOrder returns the registered modules by Order.
func (r *registry) pipelineOrder() []*module {
	return slices.SortedFunc(slices.Values(r.modules()), func(a, b *module) int { return cmp.Compare(a.Order, b.Order) })
}

// byKey returns the module whose section is key.
func (r *registry) byKey(key string) *module {
	for _, m := range r.modules() {
		if m.Key == key {
			return m
		}
	}
	return nil
}

// of returns the module whose section's type is t; it panics when there
// is none, a program that forgot to link the pass (see package pass/all).
func (r *registry) of(t reflect.Type) *module {
	r.modules()
	if m := r.byType[t]; m != nil {
		return m
	}
	panic(fmt.Sprintf("pass: %v is not the section of a registered pass (is its package imported?)", t))
}

// Modules returns the registered passes in the order their sections are
// listed in the configuration file (Info.Listed).
func Modules() []Info {
	mods := std.modules()
	out := make([]Info, len(mods))
	for i, m := range mods {
		out[i] = m.Info
		out[i].RestartOnly = slices.Clone(m.RestartOnly)
	}
	return out
}
