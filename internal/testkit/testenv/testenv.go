package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/sasl"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zksession"
	"github.com/zetcd/zetcd/xchk"
	"github.com/zetcd/zetcd/zetcd"
)

// Config is the server configuration shared by zetcd and ZooKeeper in tests: ZooKeeper runs with
// tickTime 2000, so sessions are clamped to [4s, 40s] on both.
var Config = zetcd.Config{
	MinSessionTimeout: 4 * time.Second,
	MaxSessionTimeout: 40 * time.Second,
}

// Etcd is an embedded etcd that one or more zetcd servers share.
type Etcd struct {
	Etcd *embedetcd.Etcd
}

// StartEtcd starts an embedded etcd in t.TempDir(), stopped at cleanup.
func StartEtcd(t testing.TB) *Etcd { return StartEtcdWith(t, embedetcd.Config{}) }

// StartEtcdWith is StartEtcd with cfg (its Dir, if empty, is t.TempDir()).
func StartEtcdWith(t testing.TB, cfg embedetcd.Config) *Etcd {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	e, err := embedetcd.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return &Etcd{Etcd: e}
}

// Client returns a client of the etcd, closed at cleanup.
func (c *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := c.Etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Zetcd is one zetcd server (backend, server, listener) running in the test binary.
type Zetcd struct {
	Addr    string
	Server  *zetcd.Server
	Backend *etcdstore.Store
}

// Options changes how StartZetcdOn starts a server.
type Options struct {
	// Config overrides the server config (Logger is always the test's).
	Config *zetcd.Config
	// KV, if set, wraps every etcd key-value request (to count or fail them).
	KV clientv3.KV
	// Wrap, if set, wraps the backend before the server serves it (decorators, cross-checking).
	Wrap func(zetcd.Backend) zetcd.Backend
	// ReapInterval is the backend's EtcdConfig.ReapInterval (0: the default, 60s).
	ReapInterval time.Duration
	// SuperDigest, X509 and SASL are the backend's EtcdConfig.SuperDigest, X509 and SASL.
	SuperDigest string
	X509        bool
	SASL        bool
	// Listener, if set, is served instead of a new listener on 127.0.0.1:0 (a TLS listener).
	Listener net.Listener
	// DataLimit, SpacePoll and ManagedEtcd are the backend's (etcdstore.Config).
	DataLimit   int64
	SpacePoll   time.Duration
	ManagedEtcd bool
	// Logger, if set, is the backend's and the server's logger instead of the test's (to
	// observe what they log).
	Logger *zap.Logger
	// EnforceQuota is the backend's (etcdstore.Config).
	EnforceQuota bool
}

// StartZetcdOn starts a zetcd on 127.0.0.1:0 in front of the given etcd, stopped at cleanup.
func StartZetcdOn(t testing.TB, c *Etcd, opts Options) *Zetcd {
	t.Helper()
	cli := c.Client(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	if opts.Logger != nil {
		log = opts.Logger
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := etcdstore.New(ctx, etcdstore.Config{Client: cli, KV: opts.KV, Logger: log, ReapInterval: opts.ReapInterval,
		SuperDigest: opts.SuperDigest, X509: opts.X509, SASL: opts.SASL, DataLimit: opts.DataLimit, SpacePoll: opts.SpacePoll,
		ManagedEtcd: opts.ManagedEtcd, FenceGuards: true, EnforceQuota: opts.EnforceQuota})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config
	if opts.Config != nil {
		cfg = *opts.Config
	}
	cfg.Logger = log
	var backend zetcd.Backend = b
	if opts.Wrap != nil {
		backend = opts.Wrap(b)
	}
	srv := zetcd.NewServer(backend, cfg)
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	go srv.Serve(ln)
	z := &Zetcd{Addr: ln.Addr().String(), Server: srv, Backend: b}
	t.Cleanup(z.Stop)
	return z
}

// Stop closes the server's connections and listener (sessions survive in etcd). Idempotent.
func (z *Zetcd) Stop() {
	z.Server.Close()
	z.Backend.Close()
}

// ServerOptions are settings a behaviour test asks of every server alike (ForEachServerWith).
type ServerOptions struct {
	// SuperDigest is ZooKeeper's superDigest, "user:BASE64(SHA1(user:password))"
	// (znode.DigestID): zetcd's EtcdConfig.SuperDigest, ZooKeeper's system property
	// zookeeper.DigestAuthenticationProvider.superDigest.
	SuperDigest string
	// SASL, if set, turns SASL DIGEST-MD5 on, configured alike: zetcd's AuthConfig and
	// EtcdConfig.SASL, ZooKeeper's JAAS Server section and SASLAuthenticationProvider. xchk
	// cannot mirror a SASL exchange on its oracle and skips.
	SASL *SASLOptions
	// MaxClientCnxns is zetcd's Config.MaxClientCnxns and ZooKeeper's maxClientCnxns (0: no
	// limit on either). xchk skips: its own connections to its oracle would count.
	MaxClientCnxns int
	// EnforceQuota is zetcd's EnforceQuota and ZooKeeper's system property
	// zookeeper.enforceQuota.
	EnforceQuota bool
}

// SASLOptions are the SASL settings of ServerOptions, with ZooKeeper's system properties.
type SASLOptions struct {
	Users                   map[string]string // the JAAS Server section's user_<name>="<password>"
	SuperUser               string            // zookeeper.superUser
	Required                bool              // zookeeper.sessionRequireClientSASLAuth
	EnforceSchemes          []string          // zookeeper.enforce.auth.enabled and .schemes
	AllowFailedClients      bool              // zookeeper.allowSaslFailedClients
	RemoveHost, RemoveRealm bool              // zookeeper.kerberos.removeHostFromPrincipal, removeRealmFromPrincipal
}

// JAAS returns the text of a JAAS file whose Server section holds users (DigestLoginModule).
func JAAS(users map[string]string) string {
	var b strings.Builder
	b.WriteString("Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required")
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	slices.Sort(names)
	for _, u := range names {
		fmt.Fprintf(&b, "\n    user_%s=%q", u, users[u])
	}
	b.WriteString(";\n};\n")
	return b.String()
}

// zkOptions are the ZooKeeper options for opts.
func (opts ServerOptions) zkOptions(t testing.TB) zkserver.Options {
	var o zkserver.Options
	o.SystemProps = map[string]string{}
	if opts.MaxClientCnxns > 0 {
		o.ConfigLines = append(o.ConfigLines, fmt.Sprintf("maxClientCnxns=%d", opts.MaxClientCnxns))
	}
	if opts.SuperDigest != "" {
		o.SystemProps["zookeeper.DigestAuthenticationProvider.superDigest"] = opts.SuperDigest
	}
	if opts.EnforceQuota {
		o.SystemProps["zookeeper.enforceQuota"] = "true"
	}
	if s := opts.SASL; s != nil {
		jaas := filepath.Join(t.TempDir(), "jaas.conf")
		if err := os.WriteFile(jaas, []byte(JAAS(s.Users)), 0o600); err != nil {
			t.Fatal(err)
		}
		o.SystemProps["java.security.auth.login.config"] = jaas
		o.SystemProps["zookeeper.authProvider.sasl"] = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
		o.SystemProps["zookeeper.fips-mode"] = "false"
		if s.SuperUser != "" {
			o.SystemProps["zookeeper.superUser"] = s.SuperUser
		}
		if s.Required {
			o.SystemProps["zookeeper.sessionRequireClientSASLAuth"] = "true"
		}
		if s.AllowFailedClients {
			o.SystemProps["zookeeper.allowSaslFailedClients"] = "true"
		}
		if s.RemoveHost {
			o.SystemProps["zookeeper.kerberos.removeHostFromPrincipal"] = "true"
		}
		if s.RemoveRealm {
			o.SystemProps["zookeeper.kerberos.removeRealmFromPrincipal"] = "true"
		}
		if len(s.EnforceSchemes) > 0 {
			o.SystemProps["zookeeper.enforce.auth.enabled"] = "true"
			o.SystemProps["zookeeper.enforce.auth.schemes"] = strings.Join(s.EnforceSchemes, ",")
		}
	}
	return o
}

// ZetcdOptions are the zetcd options for opts (StartZetcdOn).
func (opts ServerOptions) ZetcdOptions() Options {
	o := Options{SuperDigest: opts.SuperDigest, EnforceQuota: opts.EnforceQuota}
	cfg := Config
	cfg.MaxClientCnxns = opts.MaxClientCnxns
	if s := opts.SASL; s != nil {
		users := &sasl.Config{Users: s.Users, Principal: sasl.PrincipalMapping{RemoveHost: s.RemoveHost, RemoveRealm: s.RemoveRealm}}
		cfg.Auth = zetcd.AuthConfig{
			NewSASLServer:          func() zetcd.SASLServer { return users.NewDigestMD5() },
			SASLSuperUser:          s.SuperUser,
			EnforceSchemes:         s.EnforceSchemes,
			AllowSASLFailedClients: s.AllowFailedClients,
		}
		if s.Required {
			cfg.Auth.EnforceSchemes = []string{"sasl"}
		}
		o.SASL = true
	}
	if opts.SASL != nil || opts.MaxClientCnxns > 0 {
		o.Config = &cfg
	}
	return o
}

// StartZetcd starts a fresh etcd and one zetcd in front of it; it returns the client address.
func StartZetcd(t testing.TB) string { return StartZetcdWith(t, ServerOptions{}) }

// StartZetcdWith is StartZetcd with opts.
func StartZetcdWith(t testing.TB, opts ServerOptions) string {
	return StartZetcdOn(t, StartEtcd(t), opts.ZetcdOptions()).Addr
}

// StartZooKeeper starts a fresh real ZooKeeper 3.9 and returns its client address. It skips the
// test on a developer machine without ZooKeeper, and fails it in CI (zkserver.EnvRequire).
func StartZooKeeper(t testing.TB) string { return StartZooKeeperWith(t, ServerOptions{}) }

// StartZooKeeperWith is StartZooKeeper with opts.
func StartZooKeeperWith(t testing.TB, opts ServerOptions) string {
	return zkserver.Start(t, opts.zkOptions(t)).Addr
}

// StartXchk starts a fresh real ZooKeeper and a zetcd (on a fresh etcd) cross-checked against
// it by xchk with FailFast, answering from zetcd, and returns zetcd's address. Every difference
// closes the connection of the client that caused it, and fails the test at cleanup; so does a
// request that could not be cross-checked. Skipped like StartZooKeeper without ZooKeeper.
func StartXchk(t testing.TB) string { return StartXchkWith(t, ServerOptions{}) }

// StartXchkWith is StartXchk with opts, given to both zetcd and ZooKeeper.
func StartXchkWith(t testing.TB, opts ServerOptions) string {
	t.Helper()
	if opts.SASL != nil {
		t.Skip("xchk cannot mirror a SASL exchange on its oracle (the nonces differ)")
	}
	if opts.MaxClientCnxns > 0 {
		t.Skip("xchk's own connections to its oracle would count against maxClientCnxns")
	}
	oracle := zkserver.Start(t, opts.zkOptions(t))
	reg := prometheus.NewRegistry()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("xchk")
	var xb *xchk.Backend
	// Registered before the server starts, so it runs after the server has stopped.
	t.Cleanup(func() {
		if xb == nil {
			return
		}
		xb.Close()
		if found := mismatches(t, reg); found != "" {
			t.Errorf("xchk found differences between zetcd and ZooKeeper (see the log above): %s", found)
		}
	})
	z := StartZetcdOn(t, StartEtcd(t), Options{SuperDigest: opts.SuperDigest, EnforceQuota: opts.EnforceQuota, Wrap: func(b zetcd.Backend) zetcd.Backend {
		var err error
		xb, err = xchk.NewBackend(b, xchk.Config{
			OracleAddr: oracle.Addr,
			Answer:     xchk.AnswerZetcd,
			FailFast:   true,
			// Generous: on a loaded CI machine a slow oracle (or an event it is slow to
			// deliver) must not turn into a failed test.
			OracleTimeout: 10 * time.Second,
			EventWait:     10 * time.Second,
			Logger:        log,
			Registerer:    reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		return xb
	}})
	return z.Addr
}

// mismatches lists the non-zero zetcd_xchk_mismatches_total series of reg, "" if none.
func mismatches(t testing.TB, reg *prometheus.Registry) string {
	families, err := reg.Gather()
	if err != nil {
		t.Errorf("gather xchk metrics: %v", err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "zetcd_xchk_mismatches_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("{%s} %g", strings.Join(labels, ","), m.GetCounter().GetValue()))
		}
	}
	return strings.Join(out, "; ")
}

// Server is one implementation behaviour tests run against.
type Server struct {
	Name  string
	Start func(testing.TB) string
	// StartWith starts it with options (nil for servers that take none).
	StartWith func(testing.TB, ServerOptions) string
}

// Servers are the implementations every behaviour test runs against, with the same
// expectations.
var Servers = []Server{
	{"zetcd", StartZetcd, StartZetcdWith},
	{"zookeeper", StartZooKeeper, StartZooKeeperWith},
	{"xchk", StartXchk, StartXchkWith},
}

// ForEachServer runs f as a subtest against a fresh instance of each of Servers.
func ForEachServer(t *testing.T, f func(t *testing.T, addr string)) {
	for _, s := range Servers {
		t.Run(s.Name, func(t *testing.T) { f(t, s.Start(t)) })
	}
}

// ForEachServerWith is ForEachServer with every server started with opts.
func ForEachServerWith(t *testing.T, opts ServerOptions, f func(t *testing.T, addr string)) {
	for _, s := range Servers {
		t.Run(s.Name, func(t *testing.T) { f(t, s.StartWith(t, opts)) })
	}
}

// Connect opens a go-zookeeper session, waits until it has one, and closes it at cleanup.
func Connect(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	return ConnectServers(t, []string{addr}, nil)
}

// ConnectServers is Connect to a list of servers; hosts, if not nil, chooses among them (go-
// zookeeper's default shuffles them).
func ConnectServers(t testing.TB, servers []string, hosts zk.HostProvider) *zk.Conn {
	t.Helper()
	var conn *zk.Conn
	var events <-chan zk.Event
	var err error
	if hosts != nil {
		conn, events, err = zk.Connect(servers, 10*time.Second, zk.WithHostProvider(hosts), zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	} else {
		conn, events, err = zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := zksession.Await(context.Background(), events, 20*time.Second); err != nil {
		t.Fatalf("connect %v: %v", servers, err)
	}
	return conn
}

// WaitChildren waits until path has n children through c, typically while a closed or expired
// session's ephemerals go, and returns them with path's Stat as read then. It fails the test
// after 10s.
func WaitChildren(t testing.TB, c *zk.Conn, path string, n int) ([]string, *zk.Stat) {
	t.Helper()
	var children []string
	var st *zk.Stat
	Eventually(t, 10*time.Second, fmt.Sprintf("%d children of %s", n, path), func() error {
		var err error
		children, st, err = c.Children(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(children) != n {
			return fmt.Errorf("children %q", children)
		}
		return nil
	})
	return children, st
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// Pending reports whether zetcd's etcd backend still answers any of the named Handler methods
// with Unimplemented: such methods are listed in zetcd/etcd_pending.go until they are written.
// Without that file nothing is pending.
func Pending(t testing.TB, methods ...string) bool {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "zetcd", "etcd_pending.go"))
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range methods {
		if bytes.Contains(src, []byte(") "+m+"(")) {
			return true
		}
	}
	return false
}
