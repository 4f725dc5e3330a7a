// Command passthrough is the load test's baseline proxy: a plain
// httputil.ReverseProxy that streams every request to the upstream and
// every answer back (FlushInterval -1: flush after each write), with no
// parsing and no rewriting. It exists so the harness can run it as a
// process of its own, like ctxguard serve.
//
//	passthrough --listen 127.0.0.1:0 --upstream http://127.0.0.1:PORT
//
// Once listening it prints "listening on http://ADDR" to stderr; it stops
// on SIGINT or SIGTERM.
//
// Like ctxguard, it enables full duplex on every request
// (http.ResponseController.EnableFullDuplex): without it, the stock
// ReverseProxy cuts a few percent of SSE answers mid-stream under load
// (golang/go#40747), which would count as failures and churn connections
// in the baseline. --full-duplex=false runs it stock. Its upstream transport pools connections and sizes
// buffers as ctxguard's proxy does (64 idle connections per host, 64 KB
// read and write buffers, no compression), so the two proxies differ in
// the work they do, not in tuning.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	upstream := flag.String("upstream", "", "upstream base URL")
	duplex := flag.Bool("full-duplex", true, "enable HTTP/1 full duplex on every request")
	flag.Parse()
	if err := run(*listen, *upstream, *duplex); err != nil {
		fmt.Fprintln(os.Stderr, "passthrough:", err)
		os.Exit(1)
	}
}

func run(listen, upstream string, duplex bool) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("bad --upstream %q", upstream)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		FlushInterval: -1,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			WriteBufferSize:     64 << 10,
			ReadBufferSize:      64 << 10,
		},
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	var h http.Handler = rp
	if duplex {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).EnableFullDuplex()
			rp.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.SetFlags(0)
	log.Printf("listening on http://%s upstream=%s", ln.Addr(), u.Redacted())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
