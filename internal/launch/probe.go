package launch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/ctxguard/ctxguard/proxy"
)

// Found is what answers at an address.
type Found int

const (
	// Nothing listens there (the connection is refused).
	Nothing Found = iota
	// Ctxguard answers there.
	Ctxguard
	// Foreign is another program, or one that does not answer a health
	// probe in time.
	Foreign
)

func (f Found) String() string {
	return [...]string{"nothing", "ctxguard", "another program"}[f]
}

// probeTimeout bounds one probe.
const probeTimeout = 2 * time.Second

// probeClient never goes through an HTTP proxy from the environment and
// keeps no connection.
var probeClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	Timeout:   probeTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// Probe reports what answers at addr (HOST:PORT) and, for a ctxguard, its
// process id: a ctxguard answers GET /healthz with 200 and proxy.PidHeader.
// Probe waits at most 2 s.
func Probe(ctx context.Context, addr string) (Found, int) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return Foreign, 0
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return Nothing, 0
		}
		return Foreign, 0
	}
	resp.Body.Close()
	pid, err := strconv.Atoi(resp.Header.Get(proxy.PidHeader))
	if resp.StatusCode != http.StatusOK || err != nil || pid <= 0 {
		return Foreign, 0
	}
	return Ctxguard, pid
}
