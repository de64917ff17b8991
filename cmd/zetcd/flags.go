package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/gomaxprocs"
	"github.com/zetcd/zetcd/xchk"
	"github.com/zetcd/zetcd/zetcd"
)

// options are zetcd's command line, parsed and checked.
type options struct {
	// bulkLoad is not a flag: zetcd import sets it for its embedded etcd (embedetcd.Config).
	bulkLoad          bool
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
	readOnlyMode      bool  // --read-only-mode
	logLevel          string
	logRequests       bool        // --log-requests: zetcd.WithLogging around the served backend
	oracle            string      // --oracle: cross-check against this ZooKeeper
	oracleAnswerName  string      // --oracle-answer as given
	oracleAnswer      xchk.Answer // --oracle-answer
	oracleFailFast    bool        // --oracle-fail-fast
	fourLetterList    string      // --4lw-whitelist as given
	fourLetterWords   []string
	metricsAddr       string
	adminAddr         string // --admin-addr: ZooKeeper's AdminServer
	adminTLS          bool   // --admin-tls
	pprof             bool
	drainTimeout      time.Duration
	reapInterval      time.Duration // --reap-interval
	quotaBytes        int64         // --quota-backend-bytes
	dataLimitBytes    int64         // --data-limit-bytes
	enforceQuota      bool          // --enforce-quota
	etcdMaxTxnOps     int           // --etcd-max-txn-ops
	commitDepth       int           // --commit-depth
	etcdKeepAlive     time.Duration // --etcd-keepalive-time
	etcdKeepAliveWait time.Duration // --etcd-keepalive-timeout
	etcdSilence       time.Duration // --etcd-member-silence
	adaptProcs        bool          // --adapt-gomaxprocs
	security          securityOptions
	sasl              saslOptions
	ensemble          ensembleOptions
	migrate           migrateOptions
}

// parseFlags parses zetcd's command line (args without the program name) and checks it.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("zetcd", flag.ContinueOnError)
	o.register(fs)
	return o, o.parse(fs, args)
}

// parse parses args with fs, on which o's flags are registered (with others, perhaps), then
// resolves and checks o.
func (o *options) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.resolve(func(name string) bool { return set[name] }); err != nil {
		return err
	}
	return o.check(fs.Args())
}

// register defines zetcd's flags on fs, with their defaults.
func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.zkAddr, "zkaddr", "127.0.0.1:2181", "address to serve ZooKeeper clients on; empty: none (then --tls-zkaddr)")
	fs.StringVar(&o.endpoints, "endpoints", "", "comma-separated etcd client URLs; empty: start an embedded etcd")
	fs.StringVar(&o.dataDir, "data-dir", "zetcd.data", "data directory of the embedded etcd (unused with --endpoints)")
	fs.StringVar(&o.embeddedClientURL, "embedded-client-url", "http://127.0.0.1:0", "URL the embedded etcd serves etcd clients on (loopback; port 0: a free port)")
	fs.StringVar(&o.prefix, "prefix", "/zk/", "etcd key prefix under which zetcd stores everything; ends with /")
	fs.DurationVar(&o.minSessionTimeout, "min-session-timeout", 4*time.Second, "smallest session timeout granted to clients; see docs/operating.md, \"Timings\"")
	fs.DurationVar(&o.maxSessionTimeout, "max-session-timeout", 40*time.Second, "largest session timeout granted to clients; see docs/operating.md, \"Timings\"")
	fs.IntVar(&o.maxFrameBytes, "max-frame-bytes", encoding.DefaultMaxFrameBytes, "largest request frame accepted (ZooKeeper's jute.maxbuffer); a larger one closes the connection")
	fs.IntVar(&o.maxClientCnxns, "max-client-cnxns", 0, "connections one client IP address may hold (ZooKeeper's maxClientCnxns); 0: no limit")
	fs.BoolVar(&o.readOnlyMode, "read-only-mode", false, "while etcd has no quorum, serve reads to clients that ask for read-only sessions (ZooKeeper's readonlymode.enabled); see docs/operating.md, \"Read-only mode\"")
	fs.Int64Var(&o.maxConnQueued, "max-conn-queued-bytes", zetcd.DefaultMaxConnQueuedBytes, "bytes held for one connection; past it zetcd stops reading it, and closes it after a session timeout")
	fs.Int64Var(&o.maxQueued, "max-queued-bytes", zetcd.DefaultMaxQueuedBytes, "bytes held for all connections; past it only connections with nothing queued are read")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.logRequests, "log-requests", false, "log every request at debug level (with --log-level debug); see docs/operating.md, \"Logs\"")
	fs.StringVar(&o.fourLetterList, "4lw-whitelist", strings.Join(zetcd.DefaultFourLetterWords, ","), "comma-separated four-letter words answered, * for all (srvr always is)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "address of the HTTP endpoint for /metrics, /healthz, /readyz; empty: none; see docs/operating.md, \"Metrics\"")
	fs.StringVar(&o.adminAddr, "admin-addr", "", "address of ZooKeeper's AdminServer (/commands); empty: none; see docs/operating.md, \"AdminServer\"")
	fs.BoolVar(&o.adminTLS, "admin-tls", false, "serve --admin-addr over TLS only, with the client port's --tls-cert, --tls-key and --tls-ca")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve Go's profiler under /debug/pprof/ on --metrics-addr")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long connections may take to finish what they read; see docs/operating.md, \"Draining and upgrades\"")
	fs.DurationVar(&o.reapInterval, "reap-interval", etcdstore.DefaultReapInterval, "how often the elected zetcd deletes empty containers and expired TTL nodes; 0: never elected; see docs/operating.md, \"Scale-out and failures\"")
	fs.Int64Var(&o.quotaBytes, "quota-backend-bytes", embedetcd.DefaultQuotaBytes, "etcd's space quota in bytes (the embedded etcd's, or an external one's if unreported); see docs/operating.md, \"Storage and space\"")
	fs.DurationVar(&o.etcdKeepAlive, "etcd-keepalive-time", 10*time.Second, "with --endpoints, silence before zetcd pings an etcd member (gRPC keepalive; at least 10s)")
	fs.DurationVar(&o.etcdKeepAliveWait, "etcd-keepalive-timeout", 3*time.Second, "with --endpoints, how long a ping may go unanswered before zetcd gives up the member; see docs/operating.md, \"Scale-out and failures\"")
	fs.DurationVar(&o.etcdSilence, "etcd-member-silence", 2*time.Second, "with several --endpoints, how long a member may not answer before zetcd leaves it out; 0: off; see docs/operating.md, \"Scale-out and failures\"")
	fs.IntVar(&o.commitDepth, "commit-depth", 4, "with the embedded etcd, write batches in flight to it at once, each checked on the ones before it; 1: one at a time; see docs/design.md, \"Group commit\"")
	fs.IntVar(&o.etcdMaxTxnOps, "etcd-max-txn-ops", 128, "with --endpoints, the external etcd's --max-txn-ops, which zetcd's transactions stay within")
	fs.Int64Var(&o.dataLimitBytes, "data-limit-bytes", 0, "refuse writes past this much of etcd's database in use; 0: 3/4 of the quota; <0: none; see docs/operating.md, \"Storage and space\"")
	fs.BoolVar(&o.enforceQuota, "enforce-quota", false, "refuse creates and setData past a hard limit of zkCli's setquota with QuotaExceeded (ZooKeeper's zookeeper.enforceQuota); see docs/operating.md, \"Quotas\"")
	fs.BoolVar(&o.adaptProcs, "adapt-gomaxprocs", true, fmt.Sprintf("run on one P (GOMAXPROCS=1) below %g cores of CPU, on all from %g; $GOMAXPROCS turns it off", gomaxprocs.DefaultDownCores, gomaxprocs.DefaultUpCores))
	fs.StringVar(&o.oracle, "oracle", "", "cross-check mode: host:port of a ZooKeeper that mirrors every request; differences are logged and counted")
	fs.StringVar(&o.oracleAnswerName, "oracle-answer", string(xchk.AnswerZetcd), "with --oracle: whose answers clients get, zetcd or zookeeper")
	fs.BoolVar(&o.oracleFailFast, "oracle-fail-fast", false, "with --oracle: close a client's connection at the first difference (for tests)")
	o.security.register(fs)
	o.sasl.register(fs)
	o.ensemble.register(fs)
	o.migrate.register(fs)
}

// resolve reads the secrets (set reports whether a flag was on the command line), checks the
// security flags together, and parses the flags that name things: --oracle-answer and
// --4lw-whitelist.
func (o *options) resolve(set func(name string) bool) error {
	if err := o.security.readSecrets(set, os.LookupEnv); err != nil {
		return err
	}
	if err := o.security.check(o.zkAddr, o.endpoints); err != nil {
		return err
	}
	if err := o.sasl.check(o.security.x509()); err != nil {
		return err
	}
	if o.oracle != "" && o.sasl.on() {
		// The oracle's twin sessions cannot run the clients' SASL exchanges (their nonces
		// differ), so they would lack the sasl identities and every ACL answer would differ.
		return errors.New("--oracle cannot mirror SASL authentication; leave out --sasl-jaas-config")
	}
	answer, err := xchk.ParseAnswer(o.oracleAnswerName)
	if err != nil {
		return fmt.Errorf("--oracle-answer: %w", err)
	}
	o.oracleAnswer = answer
	words, err := zetcd.ParseFourLetterWords(o.fourLetterList)
	if err != nil {
		return fmt.Errorf("--4lw-whitelist: %w", err)
	}
	o.fourLetterWords = words
	return nil
}

// check checks the flags' values and that no argument (extra) follows them.
func (o *options) check(extra []string) error {
	if o.drainTimeout < 0 {
		return fmt.Errorf("--drain-timeout must not be negative")
	}
	if o.reapInterval < 0 {
		return fmt.Errorf("--reap-interval must not be negative")
	}
	if o.quotaBytes <= 0 {
		return fmt.Errorf("--quota-backend-bytes must be positive")
	}
	if o.commitDepth < 1 {
		return fmt.Errorf("--commit-depth must be at least 1")
	}
	if o.dataLimitBytes >= o.quotaBytes && o.endpoints == "" {
		return fmt.Errorf("--data-limit-bytes (%d) must be below --quota-backend-bytes (%d)", o.dataLimitBytes, o.quotaBytes)
	}
	if o.pprof && o.metricsAddr == "" {
		return fmt.Errorf("--pprof needs --metrics-addr")
	}
	if o.adminTLS && (o.adminAddr == "" || o.security.tlsCert == "") {
		return fmt.Errorf("--admin-tls needs --admin-addr and the client port's --tls-cert and --tls-key")
	}
	if len(extra) > 0 {
		return fmt.Errorf("unexpected arguments: %v", extra)
	}
	if o.minSessionTimeout <= 0 || o.maxSessionTimeout < o.minSessionTimeout {
		return fmt.Errorf("need 0 < --min-session-timeout (%v) <= --max-session-timeout (%v)", o.minSessionTimeout, o.maxSessionTimeout)
	}
	if o.maxFrameBytes <= 0 {
		return fmt.Errorf("--max-frame-bytes must be positive")
	}
	if o.maxConnQueued <= 0 || o.maxQueued <= 0 {
		return fmt.Errorf("--max-conn-queued-bytes and --max-queued-bytes must be positive")
	}
	if o.maxClientCnxns < 0 {
		return fmt.Errorf("--max-client-cnxns must not be negative")
	}
	if !strings.HasSuffix(o.prefix, "/") {
		return fmt.Errorf("--prefix %q must end with '/'", o.prefix)
	}
	if err := o.ensemble.check(); err != nil {
		return err
	}
	return o.migrate.check(o)
}
