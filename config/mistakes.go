package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ctxguard/ctxguard/internal/suggest"
	"github.com/ctxguard/ctxguard/model"
)

// This file catches the likely mistakes a configuration loads without:
// a mistyped key (named with the key it was probably meant to be), an
// upstream URL that repeats the /v1 clients send, and a threshold that
// can only be a typo.

// unknownKey explains the unknown key key found at line of the YAML
// document b: where it is (its section's path), and the key it was
// probably meant to be, in that section or, when the key exists under
// another section, there.
func unknownKey(b []byte, line int, key string) string {
	var doc yaml.Node
	path, found := []string(nil), false
	if yaml.Unmarshal(b, &doc) == nil {
		path, found = keyPath(&doc, line, key)
	}
	msg := fmt.Sprintf("line %d: unknown key %q", line, key)
	if found && len(path) > 0 {
		msg += " in " + strings.Join(path, ".")
	}
	if !found {
		return msg
	}
	if t := typeAt(docType(), path); t != nil {
		if s, ok := suggest.Closest(key, yamlKeys(t)); ok {
			return msg + fmt.Sprintf(" (did you mean %q?)", s)
		}
	}
	if elsewhere := keyPaths(docType(), nil, key); len(elsewhere) > 0 {
		return msg + fmt.Sprintf(" (%s is a key of %s: indent it under that section)", key, strings.Join(elsewhere, ", "))
	}
	return msg
}

// keyPath finds the mapping key key written at line and returns the keys
// of the mappings that hold it, outermost first (sequence items are
// named by their index).
func keyPath(n *yaml.Node, line int, key string) ([]string, bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if p, ok := keyPath(c, line, key); ok {
				return p, true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Line == line && k.Value == key {
				return []string{}, true
			}
			if p, ok := keyPath(v, line, key); ok {
				return append([]string{k.Value}, p...), true
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if p, ok := keyPath(c, line, key); ok {
				return append([]string{strconv.Itoa(i)}, p...), true
			}
		}
	}
	return nil, false
}

// keyedField is a struct field and the YAML key it decodes.
type keyedField struct {
	key   string
	field reflect.StructField
}

// yamlFields returns the fields of the struct type t with their YAML
// keys, in declaration order, the fields of inlined structs in their
// place.
func yamlFields(t reflect.Type) []keyedField {
	var out []keyedField
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case tag == "-" || !f.IsExported():
		case strings.Contains(","+opts+",", ",inline,"):
			if inner := deref(f.Type); inner.Kind() == reflect.Struct {
				out = append(out, yamlFields(inner)...)
			}
		case tag == "":
			out = append(out, keyedField{strings.ToLower(f.Name), f})
		default:
			out = append(out, keyedField{tag, f})
		}
	}
	return out
}

// yamlField returns the struct field of t (a struct type) that the YAML
// key name decodes into.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for _, kf := range yamlFields(t) {
		if kf.key == name {
			return kf.field, true
		}
	}
	return reflect.StructField{}, false
}

// yamlKeys returns the YAML keys of the struct type t, in declaration
// order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for _, kf := range yamlFields(t) {
		keys = append(keys, kf.key)
	}
	return keys
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// typeAt returns the struct type the YAML mapping at path decodes into,
// or nil when path does not lead to a struct the configuration has.
func typeAt(t reflect.Type, path []string) reflect.Type {
	t = deref(t)
	for _, k := range path {
		switch t.Kind() {
		case reflect.Struct:
			f, ok := yamlField(t, k)
			if !ok {
				return nil
			}
			t = deref(f.Type)
		case reflect.Map, reflect.Slice, reflect.Array:
			t = deref(t.Elem())
		default:
			return nil
		}
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	return t
}

// keyPaths returns the dotted paths of the sections of t (reached through
// structs only) that have the key key.
func keyPaths(t reflect.Type, prefix []string, key string) []string {
	t = deref(t)
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	var out []string
	for _, kf := range yamlFields(t) {
		if kf.key == key && len(prefix) > 0 {
			out = append(out, strings.Join(prefix, "."))
		}
		out = append(out, keyPaths(kf.field.Type, append(append([]string(nil), prefix...), kf.key), key)...)
	}
	return out
}

// smallestTokens is the smallest token count a threshold whose default is
// a share of the window can mean: a prompt of fewer tokens holds no
// session worth compacting, so a bare number below it is a percentage
// written without its sign (compact.prepare: 60 for 60%).
const smallestTokens = 1000

// typoThresholds refuses a threshold of the YAML document b that can only
// be a typo: a token count under smallestTokens where the default is a
// fraction of the window. Every such threshold of Defaults is checked.
func typoThresholds(b []byte, name string) error {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	var errs []string
	defaults := Defaults()
	for _, th := range fractionThresholds(defaults.document(), nil) {
		n := valueAt(doc.Content[0], th.path)
		if n == nil || n.Kind != yaml.ScalarNode {
			continue
		}
		a, err := model.ParseAmount(n.Value)
		if err != nil || a.IsFraction() || a.TokenCount() < 1 || a.TokenCount() >= smallestTokens {
			continue
		}
		key := strings.Join(th.path, ".")
		fix := fmt.Sprintf("a share of the window is written with %% (the default is %v)", th.def)
		if v := a.TokenCount(); v <= 100 {
			fix = fmt.Sprintf("write %d%% for %d percent (the default is %v)", v, v, th.def)
		}
		errs = append(errs, fmt.Sprintf("%s: line %d: %s: %s would be %s tokens, too few to be meant; %s, or a token count of at least %d",
			name, n.Line, key, n.Value, n.Value, fix, smallestTokens))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// threshold is a model.Amount of the configuration whose default is a
// fraction of the window.
type threshold struct {
	path []string
	def  model.Amount
}

// fractionThresholds returns the Amounts reachable through the structs of
// v that are fractions (the fields of inline structs in their place).
func fractionThresholds(v reflect.Value, prefix []string) []threshold {
	var out []threshold
	if a, ok := v.Interface().(model.Amount); ok {
		if a.IsFraction() {
			out = append(out, threshold{path: prefix, def: a})
		}
		return out
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(","+opts+",", ",inline,") {
			out = append(out, fractionThresholds(v.Field(i), prefix)...)
			continue
		}
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		out = append(out, fractionThresholds(v.Field(i), append(append([]string(nil), prefix...), tag))...)
	}
	return out
}

// valueAt returns the value node at the mapping keys path, or nil.
func valueAt(n *yaml.Node, path []string) *yaml.Node {
	for _, k := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}
