// Package estimator measures the token estimator (package tokens) against
// the usage real sessions recorded: Accuracy compares the estimated and
// the billed growth between a session's consecutive requests, before and
// after calibration (fitted leave-one-session-out), and HeldOut fits the
// calibration on one half of the sessions and checks the other. It is
// offline tooling: replay reports its figures, and neither the library nor
// the server links it. Reports are plain values; nothing is retained
// between calls, and the functions are safe for concurrent use on
// distinct inputs.
package estimator
