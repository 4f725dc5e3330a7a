// Package fault is ctxguard's fault-injection suite: real `ctxguard serve`
// processes over loopback, in front of a fake upstream that misbehaves on
// cue, and clients that misbehave too. Each case asserts what the client
// sees and what ctxguard keeps (or leaves alone) on disk.
//
//	go test ./internal/fault/
//
// The cases cover the failures our safety review found (foreign files in
// a data dir, blobs expiring while in use, slow readers, stalled uploads,
// upstreams that never read, 413s lost to broken pipes, memory held after
// load, local endpoints reachable by DNS rebinding or from the network,
// credentials in logs, invented headers) and the behaviour that already
// held, so it keeps holding: resets mid-stream, upstream errors passed
// through exactly, client disconnects cancelling the upstream,
// decompression bombs, path traversal on blob ids, two processes on one
// data dir, restart determinism and a full disk failing open; a
// summarizer that answers 500, hangs or is too slow (its breaker), and
// auth for those who cannot send the token header: a dashboard signed in
// through its form, signed blob links fetched by the real curl.
//
// The disk-full case mounts a small tmpfs in a private mount namespace
// (unshare -m, as root); where that is not allowed it limits the file
// size the process may write (ulimit -f) instead, and says so.
package fault
