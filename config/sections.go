package config

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/ctxguard/ctxguard/pass"
)

// This file places the passes' sections in the configuration file. The
// file's shape is a document: Config's own settings, then one section per
// registered pass (package pass), keyed by its YAML key, in the order
// pass.Modules lists them. The document is a struct type built once from
// the registry (reflect.StructOf), so yaml.v3 decodes it as it would a
// struct written out by hand (strictly: an unknown key is an error that
// names its line, and the did-you-mean hints of unknownKey read the same
// type) and prints it in declaration order.

// core is Config without its methods: the document's first field, inline.
// Its Passes field is not YAML (the document's own fields are).
type core Config

// docType returns the document's struct type.
var docType = sync.OnceValue(func() reflect.Type {
	fields := []reflect.StructField{{Name: "Core", Type: reflect.TypeFor[core](), Tag: `yaml:",inline"`}}
	for i, m := range pass.Modules() {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Pass%d", i), Type: m.Type, Tag: reflect.StructTag(fmt.Sprintf("yaml:%q", m.Key))})
	}
	return reflect.StructOf(fields)
})

// document returns a new document holding c's settings.
func (c *Config) document() reflect.Value {
	d := reflect.New(docType()).Elem()
	d.Field(0).Set(reflect.ValueOf(core(*c)))
	for i, m := range pass.Modules() {
		v, _ := c.Passes.Lookup(m.Key)
		d.Field(i + 1).Set(reflect.ValueOf(v))
	}
	return d
}

// setDocument makes c the settings of the document d.
func (c *Config) setDocument(d reflect.Value) {
	*c = Config(d.Field(0).Interface().(core))
	for i, m := range pass.Modules() {
		if err := c.Passes.Store(m.Key, d.Field(i+1).Interface()); err != nil {
			panic(err) // the document's field has the section's type
		}
	}
}

// MarshalYAML implements yaml.Marshaler: c as its document.
func (c Config) MarshalYAML() (any, error) { return c.document().Interface(), nil }

// UnmarshalYAML overlays a YAML mapping on c through its document. It has
// yaml.v2's signature, which yaml.v3 still honours, on purpose: unmarshal
// decodes with the caller's decoder and its options (KnownFields, which
// Decode sets, so an unknown key is an error), which the v3 signature's
// yaml.Node.Decode would drop.
func (c *Config) UnmarshalYAML(unmarshal func(any) error) error {
	d := c.document()
	err := unmarshal(d.Addr().Interface())
	c.setDocument(d) // what decoded, as a struct field would keep it
	return err
}

// passRestartOnly returns the passes' restart-only settings
// (pass.Module.RestartOnly), in the order their sections are listed.
func passRestartOnly() []restartSetting {
	var out []restartSetting
	for _, m := range pass.Modules() {
		for _, k := range m.RestartOnly {
			out = append(out, restartSetting{m.Key + "." + k, keepSection(m.Key, strings.Split(k, "."))})
		}
	}
	return out
}

// keepSection copies the setting at the keys path of the section key from
// a running configuration; it panics when the section has no such setting
// (a module that lists a key its type lacks: TestPassRestartOnly).
func keepSection(key string, path []string) func(Config, *Config) bool {
	return func(run Config, next *Config) bool {
		r, _ := run.Passes.Lookup(key)
		n, _ := next.Passes.Lookup(key)
		nv := reflect.New(reflect.TypeOf(n)).Elem()
		nv.Set(reflect.ValueOf(n))
		rf, nf := settingAt(reflect.ValueOf(r), path), settingAt(nv, path)
		if !rf.IsValid() || !nf.IsValid() {
			panic(fmt.Sprintf("config: section %s has no setting %s", key, strings.Join(path, ".")))
		}
		if reflect.DeepEqual(rf.Interface(), nf.Interface()) {
			return false
		}
		nf.Set(rf)
		if err := next.Passes.Store(key, nv.Interface()); err != nil {
			panic(err)
		}
		return true
	}
}

// settingAt returns the field of the struct value v at the YAML keys
// path (inline structs searched in their place), or the zero Value.
func settingAt(v reflect.Value, path []string) reflect.Value {
	for _, k := range path {
		if v = fieldByKey(v, k); !v.IsValid() {
			return v
		}
	}
	return v
}

func fieldByKey(v reflect.Value, key string) reflect.Value {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case !f.IsExported() || tag == "-":
		case strings.Contains(","+opts+",", ",inline,"):
			if fv := fieldByKey(v.Field(i), key); fv.IsValid() {
				return fv
			}
		case tag == key || tag == "" && strings.ToLower(f.Name) == key:
			return v.Field(i)
		}
	}
	return reflect.Value{}
}
