// Package embedetcd runs a single-member etcd inside the zetcd process: the default deployment
// (one command gives a working ZooKeeper) and the etcd of every test.
package embedetcd

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config configures an embedded etcd.
type Config struct {
	// Dir holds etcd's data (WAL and snapshots); it survives restarts.
	Dir string
	// ClientURL is where etcd serves clients, loopback only. Port 0 picks a free port.
	// Default "http://127.0.0.1:0".
	ClientURL string
	// CompactionRetention is the most history kept (default 10m): etcd's periodic compactor
	// keeps that much, and with Compactor it is the compactor's Retention.
	CompactionRetention time.Duration
	// Compactor turns etcd's own periodic compactor off: the caller runs zetcd's
	// (StartCompactor), which also compacts by revisions and size, defragments, and recovers
	// from the NOSPACE alarm.
	Compactor bool
	// QuotaBackendBytes is etcd's space quota (--quota-backend-bytes): past it etcd raises its
	// NOSPACE alarm and refuses writes. Default DefaultQuotaBytes.
	QuotaBackendBytes int64
	// Logger receives etcd's logs (default: none), through Quiet.
	Logger *zap.Logger
	// TLS, if set, serves clients over TLS; ClientURL must then be https. Client does not
	// apply it: clients of a TLS etcd bring their own configuration.
	TLS *TLS
	// MaxRequestBytes and MaxTxnOps, if set, replace the limits zetcd's embedded etcd has
	// (MaxRequestBytes, MaxTxnOps): tests run an etcd with an external etcd's limits.
	MaxRequestBytes, MaxTxnOps uint
	// Users makes etcd issue authentication tokens (etcd's "simple" tokens), for an etcd whose
	// clients log in with a user name and password (tests of --etcd-user). Without it, etcd
	// authentication cannot be used: zetcd's own embedded etcd has no users.
	Users bool
	// BulkLoad is for an etcd that one writer fills with large transactions (zetcd import):
	// their applies take long by design, so etcd's slow-apply warning, which also writes every
	// key of the request as text, is off.
	BulkLoad bool
	// Member, if set, makes this etcd one member of a new multi-member cluster (fault tests
	// run three as separate processes); otherwise it is a cluster of one.
	Member *Member
}

// Member places an etcd in a multi-member cluster.
type Member struct {
	Name    string // this member's name, as in Cluster
	PeerURL string // where the other members reach it (loopback, a fixed port)
	// ListenPeerURL is where it listens for them, if not at PeerURL: behind a proxy that
	// forwards PeerURL to it (the fault tests' network partitions).
	ListenPeerURL string
	// Cluster lists every member as name=peerURL, comma-separated (etcd's --initial-cluster).
	Cluster string
}

// TLS is the client-facing TLS of an embedded etcd.
type TLS struct {
	CertFile, KeyFile string // the server's certificate and key (PEM)
	// TrustedCAFile verifies client certificates; with ClientCertAuth every client must
	// present one (etcd then also accepts its common name as the user name).
	TrustedCAFile  string
	ClientCertAuth bool
}

// MaxRequestBytes is the largest etcd request the embedded etcd accepts, and
// ClientMaxCallSendMsgSize the largest a client of zetcd's sends: a request ZooKeeper accepts
// under its default jute.maxbuffer (1 MiB) becomes an etcd transaction that names a node's path
// several times (data, ACL and meta keys, compares, the multi journal), so a 1 MiB request can
// grow several-fold; etcd's default (1.5 MiB) and gRPC's (2 MiB) are too small for a multi of
// 10,000 creates or a 500,000-character name. 10 MiB is etcd's recommended maximum.
const (
	MaxRequestBytes          = 10 << 20
	ClientMaxCallSendMsgSize = MaxRequestBytes + 1<<20
)

// singleMemberCatchUpEntries is how many applied raft entries a cluster of one keeps in memory
// after each of etcd's snapshots. The entries kept are for a slow follower to catch up from,
// and a cluster of one has none; a restart replays the write-ahead log, not them. At etcd's
// default (5,000) they were a third of the live heap of a tree just loaded, each entry a whole
// transaction (docs/benchmarks.md, "Memory per znode, session and watch").
const singleMemberCatchUpEntries = 100

// singleMemberSnapshotCount is how many raft entries a cluster of one applies between etcd's
// snapshots. Raft keeps every entry since the last snapshot in memory, each a whole
// transaction, and a restart reads and replays them from the write-ahead log.
const singleMemberSnapshotCount = 1000

// DefaultQuotaBytes is the embedded etcd's default space quota, etcd's own default (2 GiB).
const DefaultQuotaBytes = 2 << 30

// MaxTxnOps is the most operations one transaction may have in the embedded etcd: a session
// close deletes all of a session's ephemerals in one transaction.
const MaxTxnOps = 1 << 16

// Etcd is a running embedded etcd.
type Etcd struct {
	e *embed.Etcd
	// closing is set by Close: etcd's listeners then report their own shutdown as errors.
	closing *atomic.Bool
	// Endpoint is the client URL actually listened on (with the real port).
	Endpoint string
	// Quota is etcd's space quota in bytes (Config.QuotaBackendBytes).
	Quota int64

	log          *zap.Logger
	retention    time.Duration
	ownCompactor bool // Config.Compactor
	mu           sync.Mutex
	compactor    *compactor // the running compactor (StartCompactor); nil if none
}

// Dirs returns where an embedded etcd with data directory dataDir keeps its snapshots (and
// database) and its write-ahead log: the layout etcd creates under Config.Dir when it starts.
// They are what ZooKeeper calls dataDir and dataLogDir (zetcd.DataDirs).
func Dirs(dataDir string) (snap, wal string) {
	return filepath.Join(dataDir, "member", "snap"), filepath.Join(dataDir, "member", "wal")
}

// BackendPath is where an embedded etcd with data directory dataDir keeps its database.
func BackendPath(dataDir string) string {
	snap, _ := Dirs(dataDir)
	return filepath.Join(snap, "db")
}

// IsNew reports whether dataDir holds no etcd data yet: an etcd started there bootstraps a new
// cluster, on the database at BackendPath if one was written there first.
func IsNew(dataDir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dataDir, "member"))
	if os.IsNotExist(err) {
		return true, nil
	}
	return false, err
}

// PrepareBackend creates the directories of BackendPath(dataDir) as etcd creates them.
func PrepareBackend(dataDir string) error {
	snap, _ := Dirs(dataDir)
	return os.MkdirAll(snap, 0o700)
}

// Start starts etcd and waits until it serves.
func Start(cfg Config) (*Etcd, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedetcd: Config.Dir is empty")
	}
	if cfg.ClientURL == "" {
		cfg.ClientURL = "http://127.0.0.1:0"
	}
	if cfg.CompactionRetention <= 0 {
		cfg.CompactionRetention = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.QuotaBackendBytes <= 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBytes
	}
	curl, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client URL %q: %w", cfg.ClientURL, err)
	}
	// The peer listener is never dialled by a single member; a free loopback port keeps two
	// embedded etcds on one machine from colliding.
	purl, _ := url.Parse("http://127.0.0.1:0")
	lpurl := purl
	ec := embed.NewConfig()
	ec.Name = "zetcd"
	if m := cfg.Member; m != nil {
		if purl, err = url.Parse(m.PeerURL); err != nil {
			return nil, fmt.Errorf("embedetcd: peer URL %q: %w", m.PeerURL, err)
		}
		lpurl = purl
		if m.ListenPeerURL != "" {
			if lpurl, err = url.Parse(m.ListenPeerURL); err != nil {
				return nil, fmt.Errorf("embedetcd: peer listen URL %q: %w", m.ListenPeerURL, err)
			}
		}
		ec.Name = m.Name
	}
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*curl}
	ec.AdvertiseClientUrls = []url.URL{*curl}
	// etcd's HTTP endpoints (/health, /metrics, /version, the gRPC gateway) on a listener of
	// their own, a unix socket in the data directory (only its owner can reach it; no port to
	// pick): sharing the gRPC port is what etcd warns against at start. zetcd does not use them.
	// The socket is bound before etcd creates its data directory: create it as etcd would.
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: %w", err)
	}
	if u, ok := httpSocketURL(cfg.Dir, cfg.TLS != nil); ok {
		ec.ListenClientHttpUrls = []url.URL{u}
	}
	// No auth tokens unless asked for: zetcd's etcd has no users, and etcd's default token
	// ("simple") warns at start that it is not signed.
	if !cfg.Users {
		ec.AuthToken = ""
	} else {
		// Users are for tests: bcrypt's cheapest cost keeps each password's hash (user add,
		// every login) from taking a second or more of a loaded machine under the race detector.
		ec.BcryptCost = uint(bcrypt.MinCost)
	}
	ec.ListenPeerUrls = []url.URL{*lpurl}
	ec.AdvertisePeerUrls = []url.URL{*purl}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if cfg.Member != nil {
		ec.InitialCluster = cfg.Member.Cluster
		ec.InitialClusterToken = "zetcd-test-cluster"
	}
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = cfg.CompactionRetention.String()
	if cfg.Compactor {
		ec.AutoCompactionRetention = "0" // off: StartCompactor's compactor does it
	}
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	if cfg.Member == nil {
		ec.SnapshotCount = singleMemberSnapshotCount
		ec.SnapshotCatchUpEntries = singleMemberCatchUpEntries
	}
	ec.MaxTxnOps = MaxTxnOps
	ec.MaxRequestBytes = MaxRequestBytes
	if cfg.MaxTxnOps > 0 {
		ec.MaxTxnOps = cfg.MaxTxnOps
	}
	if cfg.MaxRequestBytes > 0 {
		ec.MaxRequestBytes = cfg.MaxRequestBytes
	}
	if cfg.BulkLoad {
		ec.WarningApplyDuration = time.Hour
	}
	if cfg.TLS != nil {
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile:       cfg.TLS.CertFile,
			KeyFile:        cfg.TLS.KeyFile,
			TrustedCAFile:  cfg.TLS.TrustedCAFile,
			ClientCertAuth: cfg.TLS.ClientCertAuth,
		}
	}
	closing := &atomic.Bool{}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(Quiet(cfg.Logger).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &quietOnCloseCore{Core: c, closing: closing}
	})))

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start in %s: %w", cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: start in %s: %w", cfg.Dir, err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedetcd: start in %s: not ready after 60s", cfg.Dir)
	}
	// e.Clients holds the gRPC listener and the HTTP socket, in no fixed order.
	var addr net.Addr
	for _, l := range e.Clients {
		if l.Addr().Network() != "unix" {
			addr = l.Addr()
		}
	}
	if addr == nil {
		e.Close()
		return nil, fmt.Errorf("embedetcd: start in %s: no client listener", cfg.Dir)
	}
	return &Etcd{e: e, Endpoint: curl.Scheme + "://" + addr.String(), closing: closing,
		Quota: cfg.QuotaBackendBytes, log: cfg.Logger, retention: cfg.CompactionRetention, ownCompactor: cfg.Compactor}, nil
}

// httpSocketURL is the unix socket, in the data directory dir, where etcd serves HTTP; false
// when its path is too long for a unix socket (etcd then shares the gRPC port, and says so).
func httpSocketURL(dir string, tls bool) (url.URL, bool) {
	path := filepath.Join(dir, "etcd-http.sock")
	if len(path) > maxUnixSocketPath {
		return url.URL{}, false
	}
	scheme := "unix"
	if tls {
		scheme = "unixs"
	}
	return url.URL{Scheme: scheme, Path: path}, true
}

// maxUnixSocketPath is the longest unix socket path every platform takes (sun_path is 104
// bytes on BSDs and macOS, 108 on Linux, with the terminating NUL).
const maxUnixSocketPath = 103

// Client returns a new client of this etcd; the caller closes it.
func (e *Etcd) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:          []string{e.Endpoint},
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: ClientMaxCallSendMsgSize,
		Logger:             zap.NewNop(),
	})
}

// InProcessClient returns a client that calls this etcd's server in process, without gRPC:
// no encoding, no socket, no HTTP/2 framing between zetcd and its own etcd (a write through it
// takes about two thirds of the time it takes through the client endpoint). Its lease API as a
// raw client comes with it: the client has no connection to build one on. The caller closes
// the client.
func (e *Etcd) InProcessClient() (*clientv3.Client, pb.LeaseClient) {
	return v3client.New(e.e.Server), adapter.LeaseServerToLeaseClient(v3rpc.NewQuotaLeaseServer(e.e.Server))
}

// Err reports a fatal serving error.
func (e *Etcd) Err() <-chan error { return e.e.Err() }

// Close stops etcd after finishing in-flight requests; everything acknowledged is on disk.
func (e *Etcd) Close() {
	e.stopCompactor()
	e.closing.Store(true)
	e.e.Close()
}

// shutdownNoise are the messages etcd logs, as errors and warnings, when its own listeners stop
// during Close ("server closed", "use of closed network connection").
var shutdownNoise = map[string]bool{
	"setting up serving from embedded etcd failed.": true,
	"stopping insecure grpc server due to error":    true,
	"stopped insecure grpc server due to error":     true,
}

// quietOnCloseCore drops shutdownNoise once Close has begun: those entries describe a clean
// shutdown, not a failure.
type quietOnCloseCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c *quietOnCloseCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() && shutdownNoise[ent.Message] {
		return ce
	}
	return c.Core.Check(ent, ce)
}

func (c *quietOnCloseCore) With(fields []zapcore.Field) zapcore.Core {
	return &quietOnCloseCore{Core: c.Core.With(fields), closing: c.closing}
}
