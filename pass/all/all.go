// Package all links every pass ctxguard ships: importing it registers
// them with package pass. The engine (package ctxguard) imports it, so the
// library and the binary both run them; tests of packages that decode a
// configuration without the engine (package config) import it too.
//
// The pipeline runs them in this order (pass.Module.Order), each module
// saying why in its registration:
//
//	10 compress  per-result compression, the same on every request
//	20 digest    a small model's answer in place of one large result (opt-in)
//	30 persist   what is still too large, stored, with a preview
//	40 thinking  another model family's thinking removed (thinking_guard)
//	50 clear     whole old results cleared, superseding the above
//	60 compact   the oldest part of a long history summarized
//
// The configuration file lists their sections in this order
// (pass.Module.Listed): compress, digest, persist, clear, thinking_guard,
// compact.
package all

import (
	_ "github.com/ctxguard/ctxguard/pass/clearing"
	_ "github.com/ctxguard/ctxguard/pass/compact"
	_ "github.com/ctxguard/ctxguard/pass/compress"
	_ "github.com/ctxguard/ctxguard/pass/digest"
	_ "github.com/ctxguard/ctxguard/pass/persist"
	_ "github.com/ctxguard/ctxguard/pass/thinking"
)
