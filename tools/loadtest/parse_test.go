package loadtest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"100KB,1MB,5MB", []int{100 << 10, 1 << 20, 5 << 20}, false},
		{" 2kb , 3mb ,512b,77", []int{2 << 10, 3 << 20, 512, 77}, false},
		{"1GB", nil, true},
		{"0", nil, true},
		{"-1KB", nil, true},
		{"", nil, true},
		{"1MB,", nil, true},
	} {
		got, err := ParseSizes(tc.in)
		if (err != nil) != tc.wantErr || !cmp.Equal(got, tc.want) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseIntsModes(t *testing.T) {
	if got, err := ParseInts("1, 8"); err != nil || !cmp.Equal(got, []int{1, 8}) {
		t.Errorf("ParseInts = %v, %v", got, err)
	}
	if _, err := ParseInts("1,0"); err == nil {
		t.Error("ParseInts accepted 0")
	}
	if got, err := ParseModes("SSE,json"); err != nil || !cmp.Equal(got, []Mode{Stream, JSON}) {
		t.Errorf("ParseModes = %v, %v", got, err)
	}
	if _, err := ParseModes("sse,grpc"); err == nil {
		t.Error("ParseModes accepted grpc")
	}
}

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"plain", "4242 (ctxguard) S 1 4242 4242 0 -1 4194560 1500 0 0 0 123 45 0 0 20 0 7 0 100 0 0", 168 * clockTick, false},
		{"name with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0", 15 * clockTick, false},
		{"no name", "7 a R 1", 0, true},
		{"too short", "7 (x) R 1 2 3", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 5 0", 0, true},
	} {
		got, err := parseStatCPU([]byte(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: parseStatCPU = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestSortedInts(t *testing.T) {
	if got := sortedInts([]int{8, 1, 8, 2}); !cmp.Equal(got, []int{1, 2, 8}) {
		t.Errorf("sortedInts = %v", got)
	}
}

func TestParseProcStatBusy(t *testing.T) {
	stat := "cpu  100 5 50 9000 40 3 2 1 0 0\ncpu0 50 2 25 4500 20 1 1 0 0 0\n"
	got, err := parseProcStatBusy([]byte(stat))
	if want := 161 * clockTick; err != nil || got != want {
		t.Errorf("parseProcStatBusy = %v, %v; want %v", got, err, want)
	}
	if _, err := parseProcStatBusy([]byte("intr 1 2 3\n")); err == nil {
		t.Error("parseProcStatBusy without a cpu line: no error")
	}
}

func TestParseProtocols(t *testing.T) {
	got, err := ParseProtocols("anthropic, Responses,chat")
	if err != nil || !slices.Equal(got, []Protocol{Anthropic, Responses, Chat}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "gemini", "chat,"} {
		if _, err := ParseProtocols(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestCaseOrder(t *testing.T) {
	var got []string
	for _, c := range caseOrder([]Protocol{Anthropic, Chat}, []int{5 << 20, 100 << 10, 1 << 20}, []int{8, 1}, []Mode{Stream, JSON}) {
		got = append(got, c.name())
	}
	want := []string{
		"anthropic 100KB c=1 sse", "anthropic 100KB c=1 json", "chat 100KB c=1 sse", "chat 100KB c=1 json",
		"anthropic 100KB c=8 sse", "anthropic 100KB c=8 json", "chat 100KB c=8 sse", "chat 100KB c=8 json",
		"anthropic 1MB c=1 sse", "anthropic 1MB c=1 json", "chat 1MB c=1 sse", "chat 1MB c=1 json",
		"anthropic 5MB c=1 sse", "anthropic 5MB c=1 json", "chat 5MB c=1 sse", "chat 5MB c=1 json",
		"anthropic 1MB c=8 sse", "anthropic 1MB c=8 json", "chat 1MB c=8 sse", "chat 1MB c=8 json",
		"anthropic 5MB c=8 sse", "anthropic 5MB c=8 json", "chat 5MB c=8 sse", "chat 5MB c=8 json",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("caseOrder (-want +got):\n%s", diff)
	}
}
