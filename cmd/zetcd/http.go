package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// The operator's HTTP endpoint (--metrics-addr):
//
//	/metrics        Prometheus text format: zetcd's metrics, Go runtime and process collectors
//	/healthz        200 while the server is serving, etcd answers a linearizable read and etcd's
//	                NOSPACE alarm is not raised (?exclude=NOSPACE leaves that out, as etcd's own
//	                /health does: restarting zetcd does not free etcd's space)
//	/readyz         200 while the server accepts connections (listening, not draining)
//	/debug/pprof/   Go's profiler, only with --pprof
//
// /healthz is for liveness (restart a zetcd that has lost etcd or stopped serving), /readyz for
// load balancers (stop sending clients to a zetcd that drains).

// healthCheckTimeout bounds the etcd read behind /healthz.
const healthCheckTimeout = 2 * time.Second

// newRegistry returns the registry zetcd's metrics (and the cross-checker's) are registered
// on, with the Go runtime and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// probes are what the health endpoints ask.
type probes struct {
	// serving reports whether the ZooKeeper server is still serving (not closed).
	serving func() bool
	// ready reports whether it accepts new connections (listening, not draining).
	ready func() bool
	// etcd makes a cheap linearizable read; nil error means etcd is reachable and has a leader.
	etcd func(ctx context.Context) error
	// noSpace, if set, reports etcd's NOSPACE alarm (as the last space poll saw it) as an error.
	noSpace func() error
}

// newHTTPHandler returns the handler of the operator endpoint.
func newHTTPHandler(reg *prometheus.Registry, p probes, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !p.serving() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), healthCheckTimeout)
		defer cancel()
		if err := p.etcd(ctx); err != nil {
			http.Error(w, fmt.Sprintf("etcd unreachable: %v", err), http.StatusServiceUnavailable)
			return
		}
		if p.noSpace != nil && !slices.Contains(r.URL.Query()["exclude"], "NOSPACE") {
			if err := p.noSpace(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !p.ready() {
			http.Error(w, "not ready: not listening, or draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprofCmdline) // secrets redacted
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// httpEndpoint is the running operator endpoint.
type httpEndpoint struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// startHTTP listens on addr and serves h until stop.
func startHTTP(addr string, h http.Handler, log *zap.Logger) (*httpEndpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	return serveHTTP(ln, h, log), nil
}

// serveHTTP serves h on ln until stop.
func serveHTTP(ln net.Listener, h http.Handler, log *zap.Logger) *httpEndpoint {
	e := &httpEndpoint{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP endpoint stopped", zap.Error(err))
		}
	}()
	return e
}

// stop closes the endpoint, giving requests in flight a moment to finish.
func (e *httpEndpoint) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close()
	}
	<-e.done
}
