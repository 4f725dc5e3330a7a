package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// toAny rebuilds the value at s using only this package, for comparison
// with encoding/json's decoding of the same bytes.
func toAny(t testing.TB, b []byte, s Span) any {
	switch KindOf(b, s) {
	case Object:
		m := map[string]any{}
		it := Members(b, s)
		for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
			key, err := Unquote(k.Bytes(b))
			if err != nil {
				t.Fatalf("Unquote key %q: %v", k.Bytes(b), err)
			}
			m[key] = toAny(t, b, v)
		}
		if it.Err() != nil {
			t.Fatalf("members: %v", it.Err())
		}
		return m
	case Array:
		a := []any{}
		it := Elements(b, s)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			a = append(a, toAny(t, b, v))
		}
		if it.Err() != nil {
			t.Fatalf("elements: %v", it.Err())
		}
		return a
	case String:
		str, err := Unquote(s.Bytes(b))
		if err != nil {
			t.Fatalf("Unquote %q: %v", s.Bytes(b), err)
		}
		return str
	case Number:
		return json.Number(s.Bytes(b))
	case Bool:
		return b[s.Start] == 't'
	case Null:
		return nil
	}
	t.Fatalf("invalid kind at %d", s.Start)
	return nil
}

func reference(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// checkAgainstReference is the property both the unit tests and the fuzzer
// assert: the scanner accepts exactly what encoding/json accepts, and on
// accepted input every span decodes to what encoding/json decodes.
func checkAgainstReference(t testing.TB, b []byte) {
	root, err := Root(b)
	if got, want := err == nil, json.Valid(b); got != want {
		t.Fatalf("Valid(%q) = %v (err %v), encoding/json says %v", b, got, err, want)
	}
	if err != nil {
		return
	}
	want, rerr := reference(b)
	if rerr != nil {
		t.Fatalf("reference decode: %v", rerr)
	}
	got := toAny(t, b, root)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("decoded value mismatch for %q (-encoding/json +jsonscan):\n%s", b, d)
	}
}

func TestAgainstReference(t *testing.T) {
	for _, in := range corpus {
		t.Run("", func(t *testing.T) { checkAgainstReference(t, []byte(in)) })
	}
}

var corpus = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.50`, `-1.5e+10`, `1E5`, `12345678901234567890123`,
	`true`, `false`, `null`, ` {"a" : [1, 2, {"b": null}] } `,
	`{"\u0074ype":"text","type":"x"}`, `"\u00e9\/\\\"\b\f\n\r\t"`, `"\ud83d\ude00"`, `"\ud83d"`,
	`"\udc00\ud800"`, `"\ud800\u0041"`, "\"\xff\xfe\"", `"é中文😀"`,
	`[[[[[[[[[[]]]]]]]]]]`, `{"a":{"b":{"c":[{},[],""]}}}`,
	// invalid
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`,
	`tru`, `nul`, `[1 2]`, `"abc`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\x01b\"", `{} {}`, `[}`, `{]`,
	`"\`, `[`, `{"a"`, `{"a":`, `NaN`, `[1,,2]`, `{"a":1 "b":2}`,
}

func TestDepthLimit(t *testing.T) {
	for _, n := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		b := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Errorf("depth %d: Valid = %v, encoding/json %v", n, got, want)
		}
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\n\r\t\b\f\x00\x1f", "<p>&amp;</p>", "é中😀", "bad\xffutf8"} {
		q := AppendQuote(nil, s)
		if !json.Valid(q) {
			t.Fatalf("AppendQuote(%q) = %s is not valid JSON", s, q)
		}
		var want string
		if err := json.Unmarshal(q, &want); err != nil {
			t.Fatal(err)
		}
		got, err := Unquote(q)
		if err != nil || got != want {
			t.Errorf("Unquote(AppendQuote(%q)) = %q, %v; encoding/json gives %q", s, got, err, want)
		}
		if strings.ToValidUTF8(s, "\uFFFD") != got {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	}
}

func TestLookupLastWins(t *testing.T) {
	b := []byte(`{"a":1,"b":2,"a":3}`)
	v, err := Lookup(b, Span{0, len(b)}, "a")
	if err != nil || string(v.Bytes(b)) != "3" {
		t.Fatalf("Lookup a = %q, %v; want 3", v.Bytes(b), err)
	}
	if _, err := Lookup(b, Span{0, len(b)}, "c"); err != ErrNotFound {
		t.Fatalf("Lookup c err = %v, want ErrNotFound", err)
	}
}

func FuzzScanner(f *testing.F) {
	for _, in := range corpus {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstReference(t, b) })
}

func FuzzQuote(f *testing.F) {
	f.Add("hello\n\"world\"\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		q := AppendQuote(nil, s)
		var want string
		if err := json.Unmarshal(q, &want); err != nil {
			t.Fatalf("AppendQuote(%q) = %s: %v", s, q, err)
		}
		if got, err := Unquote(q); err != nil || got != want {
			t.Fatalf("Unquote = %q, %v; want %q", got, err, want)
		}
	})
}

// fuzzLiterals returns the string literals a fuzz input s stands for:
// s quoted, and s itself when it is one literal the scanner accepts.
func fuzzLiterals(s string) [][]byte {
	lits := [][]byte{AppendQuote(nil, s)}
	if v, err := Value([]byte(s), 0); err == nil && v.Start == 0 && v.End == len(s) && s[0] == '"' {
		lits = append(lits, []byte(s))
	}
	return lits
}

// FuzzUnquote: Unquote agrees with encoding/json on every literal the
// scanner accepts, with AppendQuote's output and with heavily escaped
// forms.
func FuzzUnquote(f *testing.F) {
	f.Add(`"\ud83d\ude00 \ud83d x \udc00 \u00e9 \/ \\n"`)
	f.Add("\"\xff\xfe bad utf8\"")
	f.Add(`"plain text, long enough to take the bulk path of the decoder"`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, lit := range fuzzLiterals(s) {
			var want string
			werr := json.Unmarshal(lit, &want)
			got, gerr := Unquote(lit)
			if (werr == nil) != (gerr == nil) || (werr == nil && got != want) {
				t.Fatalf("Unquote(%q) = %q, %v; encoding/json: %q, %v", lit, got, gerr, want, werr)
			}
		}
	})
}

// Blank reads white space as written, plain or escaped; anything else,
// and what is not a string literal, is not blank.
func TestBlank(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want bool
	}{
		{`""`, true},
		{`" "`, true},
		{`"\n\n"`, true},
		{`" \t\r\n\f "`, true},
		{`"\u0020\u00a0\u2028"`, true},
		{"\"\u00a0\u3000\"", true}, // raw UTF-8 NBSP and ideographic space
		{`"\n.\n"`, false},
		{`"x"`, false},
		{`"\b"`, false}, // backspace is a control character, not space
		{`"\/"`, false},
		{`"\ud800"`, false},
		{`"\u00"`, false},
		{`"\`, false},
		{`"`, false},
		{` `, false},
		{`null`, false},
		{"\"\t\"", false}, // a raw tab is not JSON
		{"\"\xff\"", false},
	} {
		if got := Blank([]byte(tc.lit)); got != tc.want {
			t.Errorf("Blank(%q) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}

// FuzzBlank: Blank agrees with the decoded string on every literal the
// scanner accepts.
func FuzzBlank(f *testing.F) {
	f.Add(`"\n \u00a0\u2029"`)
	f.Add(`" \u0009x"`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, lit := range fuzzLiterals(s) {
			dec, err := Unquote(lit)
			if err != nil {
				continue
			}
			if want := strings.TrimFunc(dec, unicode.IsSpace) == ""; Blank(lit) != want {
				t.Fatalf("Blank(%q) = %v; the decoded %q is blank: %v", lit, !want, dec, want)
			}
		}
	})
}

// BenchmarkUnquote: a 94 KB tool output with an escape every 23 bytes,
// as passes decode it to judge or rewrite it.
func BenchmarkUnquote(b *testing.B) {
	lit := append([]byte{'"'}, bytes.Repeat([]byte(`some tool output line\n`), 4096)...)
	lit = append(lit, '"')
	b.SetBytes(int64(len(lit)))
	b.ReportAllocs()
	for b.Loop() {
		if s, err := Unquote(lit); err != nil || len(s) != 4096*22 {
			b.Fatalf("Unquote: %d bytes, %v", len(s), err)
		}
	}
}
