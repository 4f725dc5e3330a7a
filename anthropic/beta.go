package anthropic

import (
	"net/http"
	"strings"
)

// AddBeta appends values to the anthropic-beta header, keeping one header
// line as the client sent it.
func AddBeta(h http.Header, values []string) {
	if len(values) == 0 {
		return
	}
	have := map[string]bool{}
	for _, v := range h.Values("Anthropic-Beta") {
		for f := range strings.SplitSeq(v, ",") {
			have[strings.TrimSpace(f)] = true
		}
	}
	var add []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v != "" && !have[v] {
			have[v] = true
			add = append(add, v)
		}
	}
	if len(add) == 0 {
		return
	}
	vs := h["Anthropic-Beta"]
	if len(vs) == 0 {
		h["Anthropic-Beta"] = []string{strings.Join(add, ",")}
		return
	}
	last := vs[len(vs)-1]
	sep := ","
	if strings.TrimSpace(last) == "" {
		sep = ""
	}
	vs = append(vs[:len(vs)-1:len(vs)-1], last+sep+strings.Join(add, ","))
	h["Anthropic-Beta"] = vs
}
