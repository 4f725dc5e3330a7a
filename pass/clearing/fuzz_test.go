package clearing

import "testing"

// FuzzClear drives the session generator and the configuration from the
// fuzz input and checks every property of property_test.go on the
// session: reproducibility from an empty store, validity, at most 4
// markers, thinking untouched where it must be, stubs naming blobs that
// hold the original, stickiness between events, events only where the
// plan has one and freeing at least clear_at_least, and a monotone plan.
// Run it with
//
//	go test ./pass/clearing/ -run '^$' -fuzz FuzzClear -fuzztime 5m
//
// Inputs worth keeping are in testdata/fuzz/FuzzClear; `go test` runs
// them and the seeds below.
func FuzzClear(f *testing.F) {
	for _, seed := range []string{"", "\x00", "ctxguard", "\xff\xff\xff\xff\xff\xff\xff\xff", "0123456789abcdef0123456789abcdef"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(checkFuzzInput)
}

// FuzzClearProtocols is FuzzClear with the protocol the session is
// written in (Anthropic, Responses, Chat Completions) drawn from the
// input too, each rewrite checked by its protocol's validator
// (protocols_property_test.go). Inputs worth keeping are in
// testdata/fuzz/FuzzClearProtocols.
func FuzzClearProtocols(f *testing.F) {
	// The eighth byte picks the protocol: under 0x56 Anthropic, then
	// Responses, from 0xab Chat ("ctxguard": Responses).
	for _, seed := range []string{"", "\x00\x00\x00\x00\x00\x00\x00\x70", "\x00\x00\x00\x00\x00\x00\x00\xd0", "ctxguard", "\xff\xff\xff\xff\xff\xff\xff\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(checkFuzzProtocols)
}
