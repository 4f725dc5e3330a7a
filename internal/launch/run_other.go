//go:build !unix

package launch

import (
	"context"
	"errors"
	"runtime"
)

// Supported reports whether Run works on this system.
const Supported = false

// Run is not available on this system: it needs Unix process groups,
// signals and file locks.
func Run(context.Context, Options) (int, error) {
	return 1, errors.New("ctxguard run is not supported on " + runtime.GOOS + ": start ctxguard serve and set the client's base URL by hand")
}
