package loadtest

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSizes parses a comma-separated list of byte sizes, each a whole
// number with an optional unit B, KB or MB (powers of 1024, case
// ignored): "100KB,1MB,5MB".
func ParseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		mult := 1
		switch {
		case strings.HasSuffix(f, "MB"):
			mult, f = 1<<20, strings.TrimSuffix(f, "MB")
		case strings.HasSuffix(f, "KB"):
			mult, f = 1<<10, strings.TrimSuffix(f, "KB")
		case strings.HasSuffix(f, "B"):
			f = strings.TrimSuffix(f, "B")
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > (1<<30)/mult {
			return nil, fmt.Errorf("loadtest: bad size %q", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// ParseInts parses a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("loadtest: bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseModes parses a comma-separated list of modes ("sse", "json").
func ParseModes(s string) ([]Mode, error) {
	var out []Mode
	for f := range strings.SplitSeq(s, ",") {
		m := Mode(strings.ToLower(strings.TrimSpace(f)))
		if m != Stream && m != JSON {
			return nil, fmt.Errorf("loadtest: bad mode %q (sse or json)", f)
		}
		out = append(out, m)
	}
	return out, nil
}

// ParseProtocols parses a comma-separated list of protocols ("anthropic",
// "responses", "chat").
func ParseProtocols(s string) ([]Protocol, error) {
	var out []Protocol
	for f := range strings.SplitSeq(s, ",") {
		p := Protocol(strings.ToLower(strings.TrimSpace(f)))
		if p != Anthropic && p != Responses && p != Chat {
			return nil, fmt.Errorf("loadtest: bad protocol %q (anthropic, responses or chat)", f)
		}
		out = append(out, p)
	}
	return out, nil
}
