// Command zetcd serves the Apache ZooKeeper client protocol with its state in etcd.
//
// With no --endpoints it starts an embedded single-member etcd with its data in --data-dir, so
// one command gives a working ZooKeeper on 127.0.0.1:2181. With --endpoints it fronts an existing
// etcd cluster; any number of zetcd processes may serve the same cluster and prefix.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/gomaxprocs"
	"github.com/zetcd/zetcd/internal/memberguard"
	"github.com/zetcd/zetcd/xchk"
	"github.com/zetcd/zetcd/zetcd"
)

// version is zetcd's own version, reported in ZooKeeper's version format by srvr.
var version = "3.9.0-zetcd-dev"

type options struct {
	zkAddr            string
	endpoints         string
	dataDir           string
	embeddedClientURL string
	prefix            string
	minSessionTimeout time.Duration
	maxSessionTimeout time.Duration
	maxFrameBytes     int
	maxConnQueued     int64 // --max-conn-queued-bytes
	maxQueued         int64 // --max-queued-bytes
	maxClientCnxns    int   // --max-client-cnxns
	logLevel          string
	logRequests       bool        // --log-requests: zetcd.WithLogging around the served backend
	oracle            string      // --oracle: cross-check against this ZooKeeper
	oracleAnswer      xchk.Answer // --oracle-answer
	oracleFailFast    bool        // --oracle-fail-fast
	fourLetterWords   []string
	metricsAddr       string
	pprof             bool
	drainTimeout      time.Duration
	reapInterval      time.Duration // --reap-interval
	quotaBytes        int64         // --quota-backend-bytes
	dataLimitBytes    int64         // --data-limit-bytes
	etcdMaxTxnOps     int           // --etcd-max-txn-ops
	etcdKeepAlive     time.Duration // --etcd-keepalive-time
	etcdKeepAliveWait time.Duration // --etcd-keepalive-timeout
	etcdSilence       time.Duration // --etcd-member-silence
	adaptProcs        bool          // --adapt-gomaxprocs
	security          securityOptions
	sasl              saslOptions
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("zetcd", flag.ContinueOnError)
	fs.StringVar(&o.zkAddr, "zkaddr", "127.0.0.1:2181", "address to serve the ZooKeeper client protocol on; empty: none (with --tls-zkaddr)")
	fs.StringVar(&o.endpoints, "endpoints", "", "comma-separated etcd client URLs; empty starts an embedded etcd")
	fs.StringVar(&o.dataDir, "data-dir", "zetcd.data", "data directory of the embedded etcd (ignored with --endpoints)")
	fs.StringVar(&o.embeddedClientURL, "embedded-client-url", "http://127.0.0.1:0", "where the embedded etcd serves etcd clients (loopback; port 0 picks a free port)")
	fs.StringVar(&o.prefix, "prefix", "/zk/", "etcd key prefix holding everything zetcd stores")
	fs.DurationVar(&o.minSessionTimeout, "min-session-timeout", 4*time.Second, "smallest session timeout granted to clients")
	fs.DurationVar(&o.maxSessionTimeout, "max-session-timeout", 40*time.Second, "largest session timeout granted to clients")
	fs.IntVar(&o.maxFrameBytes, "max-frame-bytes", encoding.DefaultMaxFrameBytes, "largest request frame accepted (ZooKeeper's jute.maxbuffer); larger closes the connection")
	fs.IntVar(&o.maxClientCnxns, "max-client-cnxns", 0, "connections one client IP address may hold at once, four-letter-word ones included (ZooKeeper's maxClientCnxns, whose default is 60); past it a new connection is closed as soon as it is accepted; 0: no limit")
	fs.Int64Var(&o.maxConnQueued, "max-conn-queued-bytes", zetcd.DefaultMaxConnQueuedBytes, "bytes one connection may hold for its client (requests read, replies and watch events not yet written); past it zetcd stops reading that connection until the client reads, and closes it if the client does not read within its session timeout")
	fs.Int64Var(&o.maxQueued, "max-queued-bytes", zetcd.DefaultMaxQueuedBytes, "those bytes over all connections; past it only connections with nothing queued are served")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&o.logRequests, "log-requests", false, "log every request (session, op, path, zxid, code, latency) at debug level, so with --log-level debug; a request that fails without a ZooKeeper code at warn")
	fourLetter := fs.String("4lw-whitelist", strings.Join(zetcd.DefaultFourLetterWords, ","), "comma-separated four-letter words answered on the client port, * for all (srvr is always answered)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "address of the HTTP endpoint serving /metrics, /healthz and /readyz; empty disables it")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve Go's profiler under /debug/pprof/ on --metrics-addr")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long connections may take to finish the requests already read before they are closed")
	fs.DurationVar(&o.reapInterval, "reap-interval", etcdstore.DefaultReapInterval, "how often empty containers and expired TTL nodes are deleted (ZooKeeper's znode.container.checkIntervalMs); one zetcd per etcd cluster and prefix, elected, does it (and ends the sessions of dead zetcd processes); 0 keeps this process out of that election")
	fs.Int64Var(&o.quotaBytes, "quota-backend-bytes", embedetcd.DefaultQuotaBytes, "the embedded etcd's space quota (etcd's --quota-backend-bytes), in bytes; with --endpoints, the external etcd's quota if it does not report its own (etcd before 3.6)")
	fs.DurationVar(&o.etcdKeepAlive, "etcd-keepalive-time", 10*time.Second, "with --endpoints, how long a connection to an etcd member may be silent before zetcd pings it (gRPC keepalive; gRPC takes no less than 10s)")
	fs.DurationVar(&o.etcdKeepAliveWait, "etcd-keepalive-timeout", 3*time.Second, "with --endpoints, how long zetcd waits for a member to answer its ping before it gives up on the member (a frozen or cut-off member) and sends the requests and streams that were on it to the others")
	fs.DurationVar(&o.etcdSilence, "etcd-member-silence", 2*time.Second, "with --endpoints naming more than one etcd member, how long a member may leave zetcd's probes (a linearizable read) unanswered, while another answers, before zetcd sends its requests to the others and closes its connections to it, failing what was in flight there at once; taken back once it answers. 0: only the keepalive gives a silent member up")
	fs.IntVar(&o.etcdMaxTxnOps, "etcd-max-txn-ops", 128, "with --endpoints, the external etcd's --max-txn-ops: zetcd commits many clients' writes in one etcd transaction and keeps it within this (the embedded etcd takes more)")
	fs.Int64Var(&o.dataLimitBytes, "data-limit-bytes", 0, "zetcd's data limit below etcd's quota, in bytes: writes that would grow etcd's database in use past it are refused with QuotaExceeded; 0: three quarters of etcd's quota; negative: no limit")
	fs.BoolVar(&o.adaptProcs, "adapt-gomaxprocs", true, fmt.Sprintf("run on one P (GOMAXPROCS=1) while zetcd uses under %g cores of CPU (a second's average), and on all cores from %g: at low load one P spares the wake-ups of idle threads (lower latency, less CPU); the GOMAXPROCS environment variable turns it off", gomaxprocs.DefaultDownCores, gomaxprocs.DefaultUpCores))
	fs.StringVar(&o.oracle, "oracle", "", "cross-check mode: host:port of a real ZooKeeper (with the same tree, e.g. fresh) that mirrors every session and request; differences are logged and counted in zetcd_xchk_mismatches_total")
	oracleAnswer := fs.String("oracle-answer", string(xchk.AnswerZetcd), "with --oracle: whose answers clients get, zetcd or zookeeper")
	fs.BoolVar(&o.oracleFailFast, "oracle-fail-fast", false, "with --oracle: close a client's connection at the first difference (for tests)")
	o.security.register(fs)
	o.sasl.register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.security.readSecrets(func(name string) bool { return set[name] }, os.LookupEnv); err != nil {
		return o, err
	}
	if err := o.security.check(o.zkAddr, o.endpoints); err != nil {
		return o, err
	}
	if err := o.sasl.check(o.security.x509()); err != nil {
		return o, err
	}
	if o.oracle != "" && o.sasl.on() {
		// The oracle's twin sessions cannot run the clients' SASL exchanges (their nonces
		// differ), so they would lack the sasl identities and every ACL answer would differ.
		return o, errors.New("--oracle cannot mirror SASL authentication; leave out --sasl-jaas-config")
	}
	answer, err := xchk.ParseAnswer(*oracleAnswer)
	if err != nil {
		return o, fmt.Errorf("--oracle-answer: %w", err)
	}
	o.oracleAnswer = answer
	words, err := zetcd.ParseFourLetterWords(*fourLetter)
	if err != nil {
		return o, fmt.Errorf("--4lw-whitelist: %w", err)
	}
	o.fourLetterWords = words
	if o.drainTimeout < 0 {
		return o, fmt.Errorf("--drain-timeout must not be negative")
	}
	if o.reapInterval < 0 {
		return o, fmt.Errorf("--reap-interval must not be negative")
	}
	if o.quotaBytes <= 0 {
		return o, fmt.Errorf("--quota-backend-bytes must be positive")
	}
	if o.dataLimitBytes >= o.quotaBytes && o.endpoints == "" {
		return o, fmt.Errorf("--data-limit-bytes (%d) must be below --quota-backend-bytes (%d)", o.dataLimitBytes, o.quotaBytes)
	}
	if o.pprof && o.metricsAddr == "" {
		return o, fmt.Errorf("--pprof needs --metrics-addr")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.minSessionTimeout <= 0 || o.maxSessionTimeout < o.minSessionTimeout {
		return o, fmt.Errorf("need 0 < --min-session-timeout (%v) <= --max-session-timeout (%v)", o.minSessionTimeout, o.maxSessionTimeout)
	}
	if o.maxFrameBytes <= 0 {
		return o, fmt.Errorf("--max-frame-bytes must be positive")
	}
	if o.maxConnQueued <= 0 || o.maxQueued <= 0 {
		return o, fmt.Errorf("--max-conn-queued-bytes and --max-queued-bytes must be positive")
	}
	if o.maxClientCnxns < 0 {
		return o, fmt.Errorf("--max-client-cnxns must not be negative")
	}
	if !strings.HasSuffix(o.prefix, "/") {
		return o, fmt.Errorf("--prefix %q must end with '/'", o.prefix)
	}
	return o, nil
}

// atLeastWarn quiets etcd's own chatter to warnings, without lowering a stricter level: zap
// refuses (and complains about) an IncreaseLevel that would not increase it.
func atLeastWarn(l *zap.Logger) *zap.Logger {
	if l.Core().Enabled(zap.InfoLevel) {
		return l.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	return l
}

func main() {
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

// etcdClient connects to etcd: to the embedded one in process (its lease API as a raw client
// too), to an external one over gRPC (leases nil: the store builds it on the connection). guard,
// if not nil, is to keep the client off members that stop answering; the caller runs it.
func etcdClient(o options, log *zap.Logger, embedded *embedetcd.Etcd, endpoints []string) (cli *clientv3.Client, leases pb.LeaseClient, guard *memberguard.Guard, err error) {
	if embedded != nil {
		cli, leases = embedded.InProcessClient()
		return cli, leases, nil, nil
	}
	etcdTLS, err := o.security.etcdTLS()
	if err != nil {
		return nil, nil, nil, err
	}
	var dialOpts []grpc.DialOption
	var dialer *memberguard.Dialer
	if len(endpoints) > 1 && o.etcdSilence > 0 {
		dialer = &memberguard.Dialer{UserTimeout: o.etcdKeepAliveWait}
		dialOpts = append(dialOpts, grpc.WithContextDialer(dialer.Dial))
	}
	cli, err = clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		DialOptions: dialOpts,
		// Requests ZooKeeper accepts can make etcd requests larger than gRPC's default
		// (embedetcd.MaxRequestBytes); an external etcd needs --max-request-bytes to match.
		MaxCallSendMsgSize: embedetcd.ClientMaxCallSendMsgSize,
		// The client spreads requests and streams over the members; a member that stops
		// answering (a frozen process, a partition that keeps the TCP connection) would hold
		// what was sent to it, the committer's transaction among them, for as long as it is
		// frozen. The member guard gives it up after --etcd-member-silence when another member
		// answers; the keepalive closes the connection to it in any case, failing what was in
		// flight there (the clients of those requests reconnect) and moving the streams to the
		// others. It pings only a connection with requests or streams on it: etcd answers pings
		// on an idle connection with "too many pings" and closes it (its PermitWithoutStream is
		// false).
		DialKeepAliveTime:    o.etcdKeepAlive,
		DialKeepAliveTimeout: o.etcdKeepAliveWait,
		Logger:               embedetcd.Quiet(atLeastWarn(log.Named("etcd-client"))),
		TLS:                  etcdTLS,
		Username:             o.security.etcdUser,
		Password:             o.security.etcdPassword,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	if dialer != nil {
		guard = memberguard.New(memberguard.Config{Client: cli, Dialer: dialer, Endpoints: endpoints,
			ProbeKey: o.prefix, Silence: o.etcdSilence, Logger: log.Named("etcd-members")})
	}
	return cli, nil, guard, nil
}

func run(o options, log *zap.Logger) error {
	if o.adaptProcs {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go gomaxprocs.Run(ctx, gomaxprocs.Policy{}, log.Named("gomaxprocs"))
	}
	var endpoints []string
	var etcdErr <-chan error
	var embedded *embedetcd.Etcd
	if o.endpoints == "" {
		e, err := embedetcd.Start(embedetcd.Config{Dir: o.dataDir, ClientURL: o.embeddedClientURL, Logger: atLeastWarn(log.Named("etcd")),
			QuotaBackendBytes: o.quotaBytes, Compactor: true})
		if err != nil {
			return err
		}
		embedded = e
		// Closed last: the server stops first, so nothing is in flight when etcd stops.
		defer e.Close()
		endpoints = []string{e.Endpoint}
		etcdErr = e.Err()
		log.Info("embedded etcd started", zap.String("data-dir", o.dataDir), zap.String("endpoint", e.Endpoint))
		// Before zetcd's first writes, which etcd refuses while a NOSPACE alarm it kept from
		// before the restart is raised (the compactor, which disarms it, starts after them).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = e.RecoverSpace(ctx, log.Named("compactor"))
		cancel()
		if err != nil {
			return err
		}
	} else {
		endpoints = strings.Split(o.endpoints, ",")
	}

	cli, leases, guard, err := etcdClient(o, log, embedded, endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	if guard != nil {
		ctx, stop := context.WithCancel(context.Background())
		guarded := make(chan struct{})
		go func() {
			defer close(guarded)
			guard.Run(ctx)
		}()
		// Deferred after the client's Close: the guard stops before the client closes.
		defer func() {
			stop()
			<-guarded
		}()
	}

	// Metrics are always collected (they cost a few atomic adds); --metrics-addr serves them.
	reg := newRegistry()
	metrics, err := zetcd.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	reap := o.reapInterval
	if reap == 0 {
		reap = -1 // EtcdConfig: negative disables, 0 is the default
	}
	maxTxnOps := o.etcdMaxTxnOps
	var watcher clientv3.Watcher // the client's
	if embedded != nil {
		maxTxnOps = embedetcd.MaxTxnOps
		watcher = embedded.Watcher()
	}
	backend, err := etcdstore.New(ctx, etcdstore.Config{Client: cli, LeaseClient: leases, KV: etcdstore.WrapKV(cli.KV, metrics), Watcher: watcher, Prefix: o.prefix, Logger: log.Named("backend"), ReapInterval: reap,
		SuperDigest: o.security.superDigest, X509: o.security.x509(), SASL: o.sasl.on(),
		DataLimit: o.dataLimitBytes, Quota: o.quotaBytes, ManagedEtcd: embedded != nil, FenceGuards: embedded != nil, MaxTxnOps: maxTxnOps, Metrics: metrics})
	cancel()
	if err != nil {
		return err
	}
	defer backend.Close()
	if embedded != nil {
		// Compacts no further than the store's watch feed has applied; stopped by the
		// embedded etcd's Close.
		if err := embedded.StartCompactor(embedetcd.CompactorConfig{Applied: backend.AppliedRevision, Pressure: backend.NearLimit, Logger: log.Named("compactor")}); err != nil {
			return err
		}
	}
	if guard != nil {
		guard.OnLeave(func() { backend.FailStuckWrites(o.etcdSilence) })
	}
	if err := registerSpaceMetrics(reg, backend.Space); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if guard != nil {
		if err := registerGuardMetrics(reg, guard); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}

	var dataDirs zetcd.DataDirs // an external etcd's files are not ours to measure
	if o.endpoints == "" {
		dataDirs.Snap, dataDirs.Log = embedetcd.Dirs(o.dataDir)
	}
	served := metrics.WrapBackend(backend)
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
			return err
		}
		defer xb.Close() // after the server has stopped, before backend.Close
		served = xb
		log.Info("cross-checking against ZooKeeper", zap.String("oracle", o.oracle),
			zap.String("answer", string(o.oracleAnswer)), zap.Bool("fail-fast", o.oracleFailFast))
	}
	if o.sasl.on() {
		log.Info("SASL DIGEST-MD5 authentication on", zap.String("jaas", o.sasl.jaasConfig), zap.String("section", o.sasl.jaasSection),
			zap.Int("users", len(o.sasl.config.Users)), zap.Strings("enforcedSchemes", o.sasl.enforcedSchemes))
		if o.sasl.readableBy != "" {
			log.Warn("the JAAS file holds passwords and its "+o.sasl.readableBy+" may read it; chmod 600 it",
				zap.String("jaas", o.sasl.jaasConfig))
		}
	}
	if o.logRequests {
		// Outermost: the log shows what clients are answered, cross-checked or not.
		served = zetcd.WithLogging(served, log.Named("requests"))
	}
	srv := zetcd.NewServer(served, zetcd.Config{
		MinSessionTimeout:  o.minSessionTimeout,
		MaxSessionTimeout:  o.maxSessionTimeout,
		MaxFrameBytes:      o.maxFrameBytes,
		MaxConnQueuedBytes: o.maxConnQueued,
		MaxQueuedBytes:     o.maxQueued,
		MaxClientCnxns:     o.maxClientCnxns,
		Logger:             log.Named("server"),
		Version:            version,
		FourLetterWords:    o.fourLetterWords,
		DataDirs:           dataDirs,
		Stats:              backend,
		Metrics:            metrics,
		Auth:               o.sasl.auth(),
	})
	ports, err := o.security.listen(o.zkAddr)
	if err != nil {
		return err
	}
	serveErr := make(chan error, len(ports))
	for _, p := range ports {
		log.Info("serving ZooKeeper clients", zap.String("addr", p.ln.Addr().String()), zap.Bool("tls", p.tls),
			zap.Strings("etcd", endpoints), zap.String("prefix", o.prefix))
		go func() {
			if err := srv.Serve(p.ln); err != nil {
				serveErr <- fmt.Errorf("serve %s: %w", p.ln.Addr(), err)
			}
		}()
	}

	if o.metricsAddr != "" {
		h := newHTTPHandler(reg, probes{
			serving: srv.Serving,
			ready:   srv.Ready,
			etcd: func(ctx context.Context) error {
				// Linearizable (goes through the leader), one key, count only: cheap.
				_, err := cli.Get(ctx, o.prefix, clientv3.WithCountOnly())
				return err
			},
			noSpace: func() error { return noSpaceAlarm(backend.Space()) },
		}, o.pprof)
		ep, err := startHTTP(o.metricsAddr, h, log.Named("http"))
		if err != nil {
			srv.Close()
			return err
		}
		// Stopped after the drain, so that /readyz reports it.
		defer ep.stop()
		log.Info("serving metrics and health", zap.String("metrics-addr", ep.addr.String()))
	}

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
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
