// Command zetcd serves the Apache ZooKeeper client protocol with its state in etcd.
//
// With no --endpoints it starts an embedded single-member etcd with its data in --data-dir, so
// one command gives a working ZooKeeper on 127.0.0.1:2181. With --endpoints it fronts an existing
// etcd cluster; any number of zetcd processes may serve the same cluster and prefix.
//
// `zetcd import --zk-data-dir DIR` writes a stopped ZooKeeper's tree into that storage instead
// (import.go, docs/migration.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/gomaxprocs"
	"github.com/zetcd/zetcd/xchk"
	"github.com/zetcd/zetcd/zetcd"
)

// version is zetcd's own version, reported in ZooKeeper's version format by srvr.
var version = "3.9.0-zetcd-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "import" {
		os.Exit(importMain(os.Args[2:], os.Stderr))
	}
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zetcd:", err)
		os.Exit(2)
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zetcd:", err)
		os.Exit(2)
	}
	if err := run(o, log); err != nil {
		log.Error("zetcd stopped", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
	log.Sync()
}

// run starts zetcd and serves until a signal or a failure. What it starts stops in the
// reverse order: the server first, etcd last, so nothing is in flight when what it runs on
// stops.
func run(o options, log *zap.Logger) error {
	if o.adaptProcs {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go gomaxprocs.Run(ctx, gomaxprocs.Policy{}, log.Named("gomaxprocs"))
	}
	if o.migrate.on() {
		return runMigrate(o, log)
	}
	etcd, err := connectEtcd(o, log)
	if err != nil {
		return err
	}
	defer etcd.close()
	ports, err := o.security.listen(o.zkAddr)
	if err != nil {
		return err
	}
	return serveZetcd(o, log, etcd, ports, handover{})
}

// handover is what migration mode gives the zetcd it starts at the cutover (migrate.go): the
// zero value is a zetcd started on its own.
type handover struct {
	// stop, closed, drains the server as SIGINT does (the migration's context ending).
	stop <-chan struct{}
	// setHTTP, if set, serves the operator endpoint's handler on the migration's endpoint,
	// which already listens on --metrics-addr.
	setHTTP func(http.Handler)
	// started, if set, is told that the server serves.
	started func()
}

// serveZetcd builds the store on etcd and serves ZooKeeper clients on ports until a signal, a
// port's failure or the embedded etcd's (waitAndStop).
func serveZetcd(o options, log *zap.Logger, etcd *etcdConn, ports []clientPort, h handover) error {
	closePorts := func() {
		for _, p := range ports {
			p.ln.Close()
		}
	}
	// Metrics are always collected (they cost a few atomic adds); --metrics-addr serves them.
	reg := newRegistry()
	metrics, err := zetcd.NewMetrics(reg)
	if err != nil {
		closePorts()
		return fmt.Errorf("register metrics: %w", err)
	}
	backend, err := newBackend(o, log, etcd, reg, metrics)
	if err != nil {
		closePorts()
		return err
	}
	releaseStartMemory(log)
	defer backend.Close()
	served, closeServed, err := wrapBackend(o, log, reg, metrics.WrapBackend(backend))
	if err != nil {
		closePorts()
		return err
	}
	defer closeServed() // after the server has stopped, before backend.Close
	srv := newServer(o, log, served, backend, metrics)
	return serve(o, log, srv, etcd, reg, backend, ports, h)
}

// newBackend builds the store on etcd and hooks it to the embedded etcd's compactor, the
// member guard and the space metrics.
func newBackend(o options, log *zap.Logger, etcd *etcdConn, reg prometheus.Registerer, metrics *zetcd.Metrics) (*etcdstore.Store, error) {
	reap := o.reapInterval
	if reap == 0 {
		reap = -1 // etcdstore.Config: negative disables, 0 is the default
	}
	maxTxnOps := o.etcdMaxTxnOps
	var watcher clientv3.Watcher // the client's
	if etcd.embedded != nil {
		maxTxnOps = embedetcd.MaxTxnOps
		watcher = etcd.embedded.Watcher()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	backend, err := etcdstore.New(ctx, etcdstore.Config{
		Client:       etcd.cli,
		LeaseClient:  etcd.leases,
		KV:           etcdstore.WrapKV(etcd.cli.KV, metrics),
		Watcher:      watcher,
		Prefix:       o.prefix,
		Logger:       log.Named("backend"),
		ReapInterval: reap,
		SuperDigest:  o.security.superDigest,
		X509:         o.security.x509(),
		SASL:         o.sasl.on(),
		DataLimit:    o.dataLimitBytes,
		Quota:        o.quotaBytes,
		ManagedEtcd:  etcd.embedded != nil,
		FenceGuards:  etcd.embedded != nil,
		CommitDepth:  o.commitDepth,
		EnforceQuota: o.enforceQuota,
		MaxTxnOps:    maxTxnOps,
		Metrics:      metrics,

		AdvertiseClientAddrs: o.ensemble.advertise,
		PublishEnsemble:      o.ensemble.publish,
		EnsembleGrace:        o.ensemble.grace,
	})
	cancel()
	if err != nil {
		return nil, err
	}
	if err := hookBackend(log, etcd, reg, backend, o.etcdSilence); err != nil {
		backend.Close()
		return nil, err
	}
	return backend, nil
}

// hookBackend starts the embedded etcd's compactor on the store's progress, has the member
// guard fail the writes stuck on a member it leaves out, and registers the space metrics (and
// with an embedded etcd, ZooKeeper's fsynctime from its log).
func hookBackend(log *zap.Logger, etcd *etcdConn, reg prometheus.Registerer, backend *etcdstore.Store, silence time.Duration) error {
	if etcd.embedded != nil {
		// Compacts no further than the store's watch feed has applied; stopped by the
		// embedded etcd's Close.
		err := etcd.embedded.StartCompactor(embedetcd.CompactorConfig{
			Applied:  backend.AppliedRevision,
			Pressure: backend.NearLimit,
			Logger:   log.Named("compactor"),
		})
		if err != nil {
			return err
		}
		if err := reg.Register(newFsyncTimeCollector(prometheus.DefaultGatherer)); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	if etcd.guard != nil {
		etcd.guard.OnLeave(func() { backend.FailStuckWrites(silence) })
	}
	if err := registerSpaceMetrics(reg, backend.Space); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if etcd.guard != nil {
		if err := registerGuardMetrics(reg, etcd.guard); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// wrapBackend wraps the measured backend in what the flags ask for: the cross-checker
// (--oracle), then request logging (--log-requests). closeServed closes the cross-checker.
func wrapBackend(o options, log *zap.Logger, reg prometheus.Registerer, served zetcd.Backend) (_ zetcd.Backend, closeServed func(), err error) {
	closeServed = func() {}
	if o.oracle != "" {
		// Cross-check mode wraps the measured backend: zetcd's metrics stay zetcd's own.
		xb, err := xchk.NewBackend(served, xchk.Config{
			OracleAddr: o.oracle,
			Answer:     o.oracleAnswer,
			FailFast:   o.oracleFailFast,
			Logger:     log.Named("xchk"),
			Registerer: reg,
		})
		if err != nil {
			return nil, nil, err
		}
		served, closeServed = xb, xb.Close
		log.Info("cross-checking against ZooKeeper", zap.String("oracle", o.oracle),
			zap.String("answer", string(o.oracleAnswer)), zap.Bool("fail-fast", o.oracleFailFast))
	}
	logSASL(o, log)
	if o.logRequests {
		// Outermost: the log shows what clients are answered, cross-checked or not.
		served = zetcd.WithLogging(served, log.Named("requests"))
	}
	return served, closeServed, nil
}

// logSASL logs that SASL is on, and warns if others than its owner may read the JAAS file.
func logSASL(o options, log *zap.Logger) {
	if !o.sasl.on() {
		return
	}
	log.Info("SASL DIGEST-MD5 authentication on", zap.String("jaas", o.sasl.jaasConfig), zap.String("section", o.sasl.jaasSection),
		zap.Int("users", len(o.sasl.config.Users)), zap.Strings("enforcedSchemes", o.sasl.enforcedSchemes))
	if o.sasl.readableBy != "" {
		log.Warn("the JAAS file holds passwords and its "+o.sasl.readableBy+" may read it; chmod 600 it",
			zap.String("jaas", o.sasl.jaasConfig))
	}
}

// newServer builds the ZooKeeper server on served; backend answers the four-letter words'
// statistics.
func newServer(o options, log *zap.Logger, served zetcd.Backend, backend *etcdstore.Store, metrics *zetcd.Metrics) *zetcd.Server {
	var dataDirs zetcd.DataDirs // an external etcd's files are not ours to measure
	if o.endpoints == "" {
		dataDirs.Snap, dataDirs.Log = embedetcd.Dirs(o.dataDir)
	}
	return zetcd.NewServer(served, zetcd.Config{
		MinSessionTimeout:  o.minSessionTimeout,
		MaxSessionTimeout:  o.maxSessionTimeout,
		MaxFrameBytes:      o.maxFrameBytes,
		MaxConnQueuedBytes: o.maxConnQueued,
		MaxQueuedBytes:     o.maxQueued,
		MaxClientCnxns:     o.maxClientCnxns,
		ReadOnlyMode:       o.readOnlyMode,
		Logger:             log.Named("server"),
		Version:            version,
		FourLetterWords:    o.fourLetterWords,
		DataDirs:           dataDirs,
		Stats:              backend,
		Metrics:            metrics,
		Auth:               o.sasl.auth(),
	})
}

// serve serves ZooKeeper clients on the client ports, the AdminServer on --admin-addr and the
// operator endpoint on --metrics-addr until a signal, a port's failure or the embedded etcd's, then shuts down.
func serve(o options, log *zap.Logger, srv *zetcd.Server, etcd *etcdConn, reg *prometheus.Registry, backend *etcdstore.Store, ports []clientPort, h handover) error {
	serveErr := serveOn(o, log, srv, ports, etcd.endpoints)
	clientPort := plainPort(ports)
	if o.adminAddr != "" {
		ep, err := startAdmin(o, log, srv, backend, clientPort)
		if err != nil {
			srv.Close()
			return err
		}
		defer ep.stop()
	}
	if h.setHTTP != nil {
		h.setHTTP(endpointHandler(o, srv, etcd.cli, reg, backend))
	} else if o.metricsAddr != "" {
		ep, err := startEndpoint(o, log, srv, etcd.cli, reg, backend)
		if err != nil {
			srv.Close()
			return err
		}
		// Stopped after the drain, so that /readyz reports it.
		defer ep.stop()
	}
	if h.started != nil {
		h.started()
	}
	return waitAndStop(o, log, srv, serveErr, etcd.failed(), h.stop)
}

// serveOn serves srv on each client port; a port's failure comes on serveErr.
func serveOn(o options, log *zap.Logger, srv *zetcd.Server, ports []clientPort, endpoints []string) (serveErr <-chan error) {
	errc := make(chan error, len(ports))
	for _, p := range ports {
		log.Info("serving ZooKeeper clients", zap.String("addr", p.ln.Addr().String()), zap.Bool("tls", p.tls),
			zap.Strings("etcd", endpoints), zap.String("prefix", o.prefix))
		go func() {
			if err := srv.Serve(p.ln); err != nil {
				errc <- fmt.Errorf("serve %s: %w", p.ln.Addr(), err)
			}
		}()
	}
	return errc
}

// startEndpoint starts the operator's HTTP endpoint on --metrics-addr.
func startEndpoint(o options, log *zap.Logger, srv *zetcd.Server, cli *clientv3.Client, reg *prometheus.Registry, backend *etcdstore.Store) (*httpEndpoint, error) {
	ep, err := startHTTP(o.metricsAddr, endpointHandler(o, srv, cli, reg, backend), log.Named("http"))
	if err != nil {
		return nil, err
	}
	log.Info("serving metrics and health", zap.String("metrics-addr", ep.addr.String()))
	return ep, nil
}

// endpointHandler is the operator's HTTP endpoint: metrics, health, readiness (http.go).
func endpointHandler(o options, srv *zetcd.Server, cli *clientv3.Client, reg *prometheus.Registry, backend *etcdstore.Store) http.Handler {
	return newHTTPHandler(reg, probes{
		serving: srv.Serving,
		ready:   srv.Ready,
		etcd: func(ctx context.Context) error {
			// Linearizable (goes through the leader), one key, count only: cheap.
			_, err := cli.Get(ctx, o.prefix, clientv3.WithCountOnly())
			return err
		},
		noSpace: func() error { return noSpaceAlarm(backend.Space()) },
	}, o.pprof)
}

// waitAndStop waits for SIGINT or SIGTERM (or stop closing), a client port's failure
// (serveErr) or the embedded etcd's (etcdErr), then stops srv: drained on a signal, closed on a
// failure.
func waitAndStop(o options, log *zap.Logger, srv *zetcd.Server, serveErr, etcdErr <-chan error, stop <-chan struct{}) error {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-stop:
		log.Info("draining: stopped", zap.Duration("drain-timeout", o.drainTimeout))
		return drain(srv, o.drainTimeout, log)
	case s := <-sig:
		log.Info("draining: no new connections; open ones finish the requests already read, then close",
			zap.String("signal", s.String()), zap.Duration("drain-timeout", o.drainTimeout))
		// A second signal exits at once: acknowledged writes are already in etcd.
		go func() {
			s := <-sig
			log.Warn("second signal: exiting without finishing the drain", zap.String("signal", s.String()))
			log.Sync()
			os.Exit(1)
		}()
		return drain(srv, o.drainTimeout, log)
	case err := <-serveErr:
		// Every acknowledged write is already committed in etcd; closing connections detaches
		// the sessions so clients resume them (here after a restart, or on another zetcd).
		srv.Close()
		return err
	case err := <-etcdErr:
		srv.Close()
		return fmt.Errorf("embedded etcd failed: %w", err)
	}
}

// drain shuts srv down gracefully: connections finish what they have read, within timeout,
// then close; their sessions are detached, so clients resume them on another zetcd. Running out
// of time is not a failure: the remaining connections are closed the same way.
func drain(srv *zetcd.Server, timeout time.Duration, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("drain timed out; remaining connections closed", zap.Error(err))
		return nil
	}
	return err
}
