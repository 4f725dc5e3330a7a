package pass

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
)

// Sections are the passes' configuration sections, by YAML key, each a
// value of its module's section type (not a pointer): config.Config
// holds them as Passes, and copying a Config copies them. A section the
// map lacks is its type's zero value, as a struct field of a Config built
// in code would be.
//
// Change sections with Set, Update, Store and Switch, which copy the map
// before they write: two Configs copied from one share the map until
// then. Never write to the map in place.
type Sections map[string]any

// Defaults returns every registered pass's default section.
func Defaults() Sections {
	s := make(Sections)
	for _, m := range std.modules() {
		s[m.Key] = m.defaults()
	}
	return s
}

// Get returns the section of type T (the zero T when s lacks it). It
// panics when no registered pass has a section of type T.
func Get[T Section](s Sections) T {
	m := std.of(reflect.TypeFor[T]())
	if v, ok := s[m.Key]; ok {
		return v.(T)
	}
	var zero T
	return zero
}

// Set makes v the section of its type. It panics when no registered pass
// has a section of type T.
func Set[T Section](s *Sections, v T) {
	m := std.of(reflect.TypeFor[T]())
	s.put(m.Key, v)
}

// Update applies f to the section of type T.
func Update[T Section](s *Sections, f func(*T)) {
	v := Get[T](*s)
	f(&v)
	Set(s, v)
}

// Lookup returns the section of the pass whose YAML key is key, or
// false when no registered pass has that key. A section s lacks is its
// type's zero value.
func (s Sections) Lookup(key string) (any, bool) {
	m := std.byKey(key)
	if m == nil {
		return nil, false
	}
	if v, ok := s[key]; ok {
		return v, true
	}
	return reflect.Zero(m.Type).Interface(), true
}

// Store makes v the section of the pass whose YAML key is key. It is an
// error when no registered pass has that key or when v is not of its
// section's type.
func (s *Sections) Store(key string, v any) error {
	m := std.byKey(key)
	if m == nil {
		return fmt.Errorf("pass: no pass has the section %q", key)
	}
	if t := reflect.TypeOf(v); t != m.Type {
		return fmt.Errorf("pass: section %q is a %v, not a %v", key, m.Type, t)
	}
	s.put(key, v)
	return nil
}

// put sets s[key] = v in a copy of the map.
func (s *Sections) put(key string, v any) {
	n := make(Sections, len(*s)+1)
	maps.Copy(n, *s)
	n[key] = v
	*s = n
}

// Enabled reports whether the pass named name is switched on in s; false
// for a name no registered pass has.
func (s Sections) Enabled(name string) bool {
	for _, m := range std.modules() {
		if m.Name == name {
			v, _ := s.Lookup(m.Key)
			return m.enabled(v)
		}
	}
	return false
}

// Switch switches the pass named name on or off. It is an error when no
// registered pass has that name.
func (s *Sections) Switch(name string, on bool) error {
	for _, m := range std.modules() {
		if m.Name == name {
			v, _ := s.Lookup(m.Key)
			s.put(m.Key, m.setOn(v, on))
			return nil
		}
	}
	return fmt.Errorf("pass: no pass is named %q", name)
}

// Validate reports every problem of every section, each prefixed with its
// section's key ("clear: keep_uses: ..."), in the order the sections are
// listed, joined; or nil.
func (s Sections) Validate() error {
	var errs []error
	for _, m := range std.modules() {
		v, _ := s.Lookup(m.Key)
		if err := m.validate(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Key, err))
		}
	}
	return errors.Join(errs...)
}
