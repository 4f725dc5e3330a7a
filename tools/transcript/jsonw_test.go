package transcript

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// toValidUTF8 replaces each invalid byte with U+FFFD, as appendQuote does.
func toValidUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func TestQuoteLikeJSONStringify(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1b\x1f", `"\u0000\u0001\u001b\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"<a href='x'>&amp;</a>", `"<a href='x'>&amp;</a>"`},
		{"é → 語 😀", `"é → 語 😀"`},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"ok\xffend", "\"ok\uFFFDend\""},
		{"/path/to", `"/path/to"`},
	} {
		if got := string(quote(tc.in)); got != tc.want {
			t.Errorf("quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if !utf8.ValidString(string(quote("\xc3"))) {
		t.Error("invalid UTF-8 passed through")
	}
}

func TestCompact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{ "a" : [ 1 , 2 ] , "b":"x y" }`, `{"a":[1,2],"b":"x y"}`},
		{"{\n  \"k\": \"v\\\" \\\\ \",\n  \"n\": -1.5e3\n}", `{"k":"v\" \\ ","n":-1.5e3}`},
		{`"\u00e9 stays escaped"`, `"\u00e9 stays escaped"`},
		{`{"z":1,"a":2}`, `{"z":1,"a":2}`}, // key order kept
		{` true `, `true`},
	} {
		if got := string(compact([]byte(tc.in))); got != tc.want {
			t.Errorf("compact(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAppendMarked(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"text","text":"x"}`, `{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}`},
		{`{}`, `{"cache_control":{"type":"ephemeral"}}`},
	} {
		if got := string(appendMarked(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendMarked(%s) = %s", tc.in, got)
		}
	}
}
