package etcdstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

// Config configures a Store.
type Config struct {
	// Client is the etcd client; its Lease API keeps sessions alive.
	Client *clientv3.Client
	// LeaseClient, if set, is the lease API the sessions' keepalive stream runs on (keepalive.go)
	// instead of one on Client's connection: a Client that calls an embedded etcd in process
	// (embedetcd.Etcd.InProcessClient) has no connection.
	LeaseClient pb.LeaseClient
	// KV, if set, is used for every key-value request instead of Client.KV (tests wrap it to
	// count round trips; decorators wrap it for metrics).
	KV clientv3.KV
	// Watcher, if set, is the watcher the watch feed runs on instead of Client's: the embedded
	// etcd's store watcher (embedetcd.Etcd.Watcher) saves the feed four goroutine hand-offs per
	// revision.
	Watcher clientv3.Watcher
	// Prefix holds every key zetcd writes (default "/zk/"); nothing outside it is touched.
	Prefix string
	// Logger (default: no logging).
	Logger *zap.Logger
	// LeaseMargin is how much longer a session's etcd lease lives than the end of an orphaned
	// session needs (leaseTTL): how long an etcd leader may stall (frozen, its disk stuck)
	// without revoking the leases of live sessions as it resumes. It does not change when a
	// session ends: the zetcd serving it, or the elected one if that zetcd died (orphans.go),
	// ends it at its timeout, with exact parent stats. Default 60s.
	LeaseMargin time.Duration
	// ReapInterval is how often the reaper looks for empty containers and expired TTL nodes to
	// delete (reaper.go); one zetcd per cluster and prefix, elected, does it, and also
	// ends the orphaned sessions of dead zetcd processes (orphans.go). Default
	// DefaultReapInterval (ZooKeeper's 60s); negative keeps this process out of the election.
	ReapInterval time.Duration
	// SuperDigest is ZooKeeper's superDigest ("user:BASE64(SHA1(user:password))", see znode.DigestID):
	// a connection that authenticates with that digest gets the super identity, which passes
	// every ACL check. Empty: no super user.
	SuperDigest string
	// X509 enables the x509 scheme: connections with a verified TLS client certificate hold
	// x509:<subject DN> (ConnectParams.AuthIDs), and ACLs may name such ids.
	X509 bool
	// SASL enables the sasl scheme: connections that complete a SASL exchange hold
	// sasl:<principal> (Session.AddAuthIDs), and ACLs may name such ids.
	SASL bool

	// AdvertiseClientAddrs are the host:port addresses clients should use for this process
	// (CheckAdvertiseAddr), stored in its process key; the first is the one published in
	// /zookeeper/config (ensemble.go).
	AdvertiseClientAddrs []string
	// PublishEnsemble makes this process, while it is the elected leader, keep
	// /zookeeper/config listing the live processes' first advertised addresses (ensemble.go);
	// a leader without it keeps the node empty. Every process of a prefix should agree.
	PublishEnsemble bool
	// EnsembleGrace is how long an address must be live before it is published, and absent
	// before it is dropped. Default DefaultEnsembleGrace.
	EnsembleGrace time.Duration

	// DataLimit bounds zetcd's data below etcd's space quota (space.go): a write that would
	// grow etcd's database in use past it is refused with QuotaExceeded. 0: three quarters of
	// etcd's quota; negative: no limit.
	DataLimit int64
	// Quota is etcd's space quota, used when etcd does not report its own (before 3.6).
	// Default 2 GiB, etcd's default.
	Quota int64
	// SpacePoll is how often etcd's status (database size and quota) and alarms are read
	// (default 1s); negative: never, and then there is no limit.
	SpacePoll time.Duration
	// ManagedEtcd says etcd is the embedded one, whose compactor recovers from a NOSPACE
	// alarm by itself (internal/embedetcd): the store then tells no operator what to do.
	ManagedEtcd bool
	// FenceGuards makes the committer guard a batch with one compare on the fence key (keys.go)
	// instead of two per znode it read: less work for etcd per write (setData at 64 connections
	// 25% faster), but any other write to the tree since the batch's read (through another
	// zetcd, or this one's setACL, session ends and reaper) fails the batch, which is then
	// checked again with per-znode guards, and the next batches go without the fence for
	// fenceHoldoff. For one zetcd per etcd, as with the embedded etcd. Znodes of a session
	// (whose lease may expire) keep their own guard. The watch feed turns it off for good if it
	// sees a znode written without the fence (fenceWatch).
	FenceGuards bool
	// CommitDepth bounds the write batches in flight to etcd at once while fence guards are on
	// (pipeline.go): 0 is defaultCommitDepth, 1 commits one batch at a time.
	CommitDepth int

	// EnforceQuota is ZooKeeper's zookeeper.enforceQuota: a create or setData past a hard
	// limit of a quota under /zookeeper/quota is refused with QuotaExceeded, and one past a
	// soft limit logged (quota.go). Without it quotas are only counted, as in ZooKeeper.
	EnforceQuota bool

	// MaxTxnOps is etcd's --max-txn-ops: the committer keeps a batch of writes within it
	// (commit.go). Default 128, etcd's default.
	MaxTxnOps int
	// Metrics, if set, records the sizes of write batches.
	Metrics *zetcd.Metrics

	// manualWatchFeed (tests only) leaves starting the watch feed to the test.
	manualWatchFeed bool
	// treeWait (tests only) replaces treeWaitLimit.
	treeWait time.Duration
}

// defaultMaxTxnOps is etcd's default --max-txn-ops.
const defaultMaxTxnOps = 128

// Store is the Backend that keeps the ZooKeeper tree and its sessions in etcd, following
// the key layout of keys.go. Many Stores (in many processes) may share one etcd cluster and
// prefix: all coordination goes through etcd transactions.
type Store struct {
	// migrated is the table of a migration's cutover (cutover.go), by which Stats show
	// ZooKeeper's zxids; nil without one.
	migrated *zxidTable

	kv    clientv3.KV
	lease clientv3.Lease
	// keeper refreshes the leases of this process's sessions (keepalive.go).
	keeper  *leaseKeeper
	watcher clientv3.Watcher
	// watches holds every watch of this process, fed by one etcd watch (feed.go).
	watches *watch.Registry
	// tree is the replica of the tree that reads are served from, kept by the feed (replica.go)
	// and the committer (own.go).
	tree *replica
	// applyMu is held by whoever applies a revision to tree and fires its watches, the feed or
	// the committer (own.go); it guards own.
	applyMu sync.Mutex
	own     ownRevisions
	// treeWait bounds a read's wait for the replica (treeWaitLimit).
	treeWait time.Duration
	// feedHeard is when (UnixNano) the watch feed last heard etcd: a response, events or a
	// progress notification (feed.go).
	feedHeard atomic.Int64
	// local holds the Session objects this process serves (session.go).
	local localSessions
	// readOnly holds the read-only sessions (readonly.go).
	readOnly    readOnlySessions
	keys        keySchema
	log         *zap.Logger
	leaseMargin time.Duration // Config.LeaseMargin; see leaseTTL
	nowFn       func() time.Time
	bgCtx       context.Context
	cancel      context.CancelFunc
	// commits batches this process's writes (commit.go); commitDepth bounds its batches in
	// flight (Config.CommitDepth).
	commits     committer
	commitDepth int
	// maxBatchOps bounds a batch's etcd operations (Config.MaxTxnOps).
	maxBatchOps int
	// metrics, if set, counts write batches.
	metrics *zetcd.Metrics
	// fenceGuards: the committer guards batches with the fence key (Config.FenceGuards); cleared
	// for good by the watch feed if a znode is written without it (fenceWatch).
	fenceGuards atomic.Bool
	// enforceQuota is Config.EnforceQuota.
	enforceQuota bool
	// fenceResumes is when (UnixNano) fence guards resume after a batch failed them.
	fenceResumes atomic.Int64
	// reaper deletes containers and TTL nodes when this process is elected (reaper.go).
	reaper reaper
	// process is this process's identity and process key; orphans the sessions of dead
	// processes that this process, when elected, ends (orphans.go).
	process processRegistration
	orphans orphanAdoptions
	// newestAnswer is the newest zxid any session of this process was answered with (a
	// write's own, a read's): with the watch feed's progress, what LastZxid reports.
	newestAnswer atomic.Int64
	// feedNext is the revision the watch feed would watch from again: it has received every
	// revision before it (AppliedRevision).
	feedNext atomic.Int64
	// space knows etcd's space and refuses writes past the data limit (space.go).
	space *spaceMonitor
	// advertise, publishEnsemble and ensembleGrace are Config's AdvertiseClientAddrs,
	// PublishEnsemble and EnsembleGrace.
	advertise       []string
	publishEnsemble atomic.Bool
	ensembleGrace   time.Duration
	// superDigest, x509 and sasl are Config's SuperDigest, X509 and SASL.
	superDigest string
	x509        bool
	sasl        bool
}

// providers says which optional ACL schemes the store accepts.
func (b *Store) providers() znode.Providers { return znode.Providers{X509: b.x509, SASL: b.sasl} }

var _ zetcd.Backend = (*Store)(nil)

// New connects the schema to etcd and creates the system nodes (/, /zookeeper,
// /zookeeper/quota, /zookeeper/config) if this prefix has never been used.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("zetcd: Config.Client is nil")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/zk/"
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.LeaseMargin <= 0 {
		cfg.LeaseMargin = defaultLeaseMargin
	}
	kv := cfg.KV
	if kv == nil {
		kv = cfg.Client.KV
	}
	if cfg.SpacePoll == 0 {
		cfg.SpacePoll = defaultSpacePoll
	}
	if cfg.Quota <= 0 {
		cfg.Quota = defaultQuota
	}
	space := &spaceMonitor{cli: cfg.Client, log: cfg.Logger, interval: cfg.SpacePoll, limit: cfg.DataLimit,
		quota: cfg.Quota, managed: cfg.ManagedEtcd}
	kv = &spaceKV{KV: kv, m: space}
	bgCtx, cancel := context.WithCancel(context.Background())
	b := &Store{
		// Requests over etcd's limits are answered with a ZooKeeper error (limits.go).
		kv:          &limitsKV{KV: kv, limits: newEtcdLimits(), log: cfg.Logger},
		lease:       cfg.Client.Lease,
		keeper:      newLeaseKeeper(cmp.Or(cfg.LeaseClient, pb.NewLeaseClient(cfg.Client.ActiveConnection())), cfg.Logger),
		watcher:     cmp.Or[clientv3.Watcher](cfg.Watcher, cfg.Client.Watcher),
		keys:        keySchema{prefix: cfg.Prefix},
		log:         cfg.Logger,
		leaseMargin: cfg.LeaseMargin,
		nowFn:       time.Now,
		bgCtx:       bgCtx,
		cancel:      cancel,

		superDigest: cfg.SuperDigest,
		advertise:   cfg.AdvertiseClientAddrs,
		x509:        cfg.X509,
		sasl:        cfg.SASL,
		orphans:     orphanAdoptions{m: map[encoding.SessionID]int64{}, scan: make(chan struct{}, 1)},
		space:       space,
		maxBatchOps: cmp.Or(cfg.MaxTxnOps, defaultMaxTxnOps),
		metrics:     cfg.Metrics,
	}
	b.commits.b = b
	b.commits.queued = make(chan struct{}, 1)
	b.commitDepth = cmp.Or(cfg.CommitDepth, defaultCommitDepth)
	b.fenceGuards.Store(cfg.FenceGuards)
	b.enforceQuota = cfg.EnforceQuota
	b.publishEnsemble.Store(cfg.PublishEnsemble)
	b.ensembleGrace = cmp.Or(cfg.EnsembleGrace, DefaultEnsembleGrace)
	for _, a := range cfg.AdvertiseClientAddrs {
		if err := CheckAdvertiseAddr(a); err != nil {
			cancel()
			return nil, fmt.Errorf("zetcd: %w", err)
		}
	}
	if space.interval > 0 {
		// The first poll before serving: the limit holds from the first write.
		if err := space.poll(ctx); err != nil {
			b.log.Warn("cannot read etcd's space (status and alarms); no data limit until it can", zap.Error(err))
		}
		space.done = make(chan struct{})
		go space.run(bgCtx)
	}
	go b.keeper.run(bgCtx)
	go b.keeper.watch(bgCtx, b.leaseLapsed)
	rev, err := b.bootstrap(ctx)
	if err == nil {
		err = b.loadMigratedZxids(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if err := b.registerProcess(ctx); err != nil {
		cancel()
		return nil, err
	}
	b.treeWait = cmp.Or(cfg.treeWait, treeWaitLimit)
	b.tree = newReplica(b.keys, b.log)
	b.tree.migrated = b.migrated
	loadStart := time.Now()
	if err := b.tree.load(ctx, b.kv, rev); err != nil {
		cancel()
		return nil, err
	}
	b.log.Info("replica loaded", zap.Int64("revision", rev), zap.Int64("znodes", b.tree.backendStats().NodeCount-1),
		zap.Duration("took", time.Since(loadStart)))
	b.watches = watch.NewRegistry(b.tree.stateZxid(rev))
	b.feedHeard.Store(time.Now().UnixNano())
	b.feedNext.Store(rev + 1)
	if !cfg.manualWatchFeed {
		go b.runWatchFeed(rev)
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = DefaultReapInterval
	}
	if cfg.ReapInterval > 0 {
		// Not ctx: loading a large tree may have taken past its deadline.
		rctx, rcancel := context.WithTimeout(bgCtx, 10*time.Second)
		b.startReaper(rctx, cfg.Client, cfg.ReapInterval)
		rcancel()
	}
	return b, nil
}

// Close stops the backend's background work (session keepalives, the reaper, which hands its
// role over, the process key, which it deletes). It does not end sessions: their clients resume
// them on another zetcd, or the leader ends them at their timeout (orphans.go).
func (b *Store) Close() {
	b.cancel()
	b.stopReaper()
	<-b.process.done
	if b.space.done != nil {
		<-b.space.done
	}
}

func (b *Store) nowMs() int64 { return b.nowFn().UnixMilli() }

// answered records that a session of this process was answered with zxid z.
func (b *Store) answered(z encoding.Zxid) {
	for {
		cur := b.newestAnswer.Load()
		if int64(z) <= cur || b.newestAnswer.CompareAndSwap(cur, int64(z)) {
			return
		}
	}
}

// newestAnswerRev is the revision of the newest zxid answered (answered).
func (b *Store) newestAnswerRev() int64 { return revOf(encoding.Zxid(b.newestAnswer.Load())) }

// bootstrap writes the system nodes in one transaction, only if the root does not exist yet,
// and fails if an import into the prefix did not finish. It returns the revision it ran at.
func (b *Store) bootstrap(ctx context.Context) (int64, error) {
	all := []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}
	read := []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}
	var puts []clientv3.Op
	for _, p := range znode.SystemPaths {
		acl := all
		if p == "/zookeeper/config" {
			acl = read
		}
		puts = append(puts, clientv3.OpPut(b.keys.data(p), encodeDataValue([]byte{}, 0, zxidIndexes{}, aclValue{ACL: acl})))
	}
	// An import (import.go) writes the system nodes itself, in the transaction that puts its
	// marker; a prefix holding the marker is half written and is not served.
	marker := b.keys.importMarker()
	r, err := b.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.keys.data("/")), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(marker), "=", 0)).
		Then(append(puts, b.fenceOp())...).
		Else(clientv3.OpGet(marker)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("zetcd: bootstrap system nodes under %q: %w", b.keys.prefix, err)
	}
	if !r.Succeeded {
		if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return 0, checkImportMarker(b.keys, kvs[0].Value)
		}
	}
	return r.Header.Revision, nil
}
