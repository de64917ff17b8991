package etcdstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// The cutover of a migration (docs/migration.md, "Cutover") turns a Mirror's copy into a store
// New serves: the sessions relayed to ZooKeeper are written as Import writes imported ones
// (TakeOver), etcd's revision is moved past ZooKeeper's zxids (PadPast), and the import marker
// goes (EndMigration). Each step is one of etcd's writes or a run of them that may be done again.

// CutoverConfig says where the copy is.
type CutoverConfig struct {
	Client *clientv3.Client
	// LeaseClient grants the sessions' leases with their ids (default: one on Client's
	// connection).
	LeaseClient pb.LeaseClient
	// Prefix is the store's prefix (default "/zk/").
	Prefix string
	Logger *zap.Logger
}

func (c CutoverConfig) fill() CutoverConfig {
	c.Prefix = cmp.Or(c.Prefix, "/zk/")
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.LeaseClient == nil {
		c.LeaseClient = pb.NewLeaseClient(c.Client.ActiveConnection())
	}
	return c
}

// MigratedSession is a ZooKeeper session that zetcd takes over: its id, ZooKeeper's password
// for it and its timeout.
type MigratedSession struct {
	ID        int64
	Passwd    []byte
	TimeoutMs int32
}

// TakeOver writes each session's key on a lease of its id, as Import writes an imported
// session's: owned by no process, so that the elected zetcd treats it as an orphan (orphans.go),
// resumed by its client with its id and password or ended at its timeout. The lease of a
// session whose ephemerals the copy holds exists already (the Mirror's): it is refreshed and
// kept. A session id that is not positive cannot be a lease: skipped lists those. granted lists
// the leases TakeOver granted, after an error too: a cutover that fails before the import
// marker goes revokes them (RevokeTakenOver), as the sessions stay ZooKeeper's.
func TakeOver(ctx context.Context, cfg CutoverConfig, sessions []MigratedSession) (skipped, granted []int64, err error) {
	cfg = cfg.fill()
	keys := keySchema{prefix: cfg.Prefix}
	for _, s := range sessions {
		if s.ID <= 0 {
			skipped = append(skipped, s.ID)
			continue
		}
		fresh, err := takeLease(ctx, cfg, s)
		if fresh {
			granted = append(granted, s.ID)
		}
		if err != nil {
			return skipped, granted, fmt.Errorf("cutover: the lease of session %#x: %w", s.ID, err)
		}
		v := encodeSessionValue(sessionValue{passwd: s.Passwd, timeoutMs: s.TimeoutMs})
		if _, err := cfg.Client.Put(ctx, keys.session(encoding.SessionID(s.ID)), v, clientv3.WithLease(clientv3.LeaseID(s.ID))); err != nil {
			return skipped, granted, fmt.Errorf("cutover: the key of session %#x: %w", s.ID, err)
		}
	}
	return skipped, granted, nil
}

// takeLease grants session s's lease, or refreshes it if it exists (the Mirror's, for a session
// whose ephemerals the copy holds); fresh says that it was granted, or may have been.
func takeLease(ctx context.Context, cfg CutoverConfig, s MigratedSession) (fresh bool, err error) {
	live, err := cfg.Client.TimeToLive(ctx, clientv3.LeaseID(s.ID))
	if err != nil {
		return false, err
	}
	if live.TTL > 0 {
		_, err = cfg.Client.KeepAliveOnce(ctx, clientv3.LeaseID(s.ID))
		return false, err
	}
	ttl := sessionTTL(zkdata.Session{ID: s.ID, Timeout: s.TimeoutMs})
	_, err = cfg.LeaseClient.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: s.ID, TTL: ttl})
	if rpctypes.Error(err) == rpctypes.ErrLeaseExist { // granted meanwhile, by an attempt whose answer was lost
		_, err = cfg.Client.KeepAliveOnce(ctx, clientv3.LeaseID(s.ID))
	}
	return true, err
}

// RevokeTakenOver revokes the leases TakeOver granted, with the session keys on them; a lease
// already gone is no error.
func RevokeTakenOver(ctx context.Context, cfg CutoverConfig, granted []int64) error {
	cfg = cfg.fill()
	for _, id := range granted {
		_, err := cfg.Client.Revoke(ctx, clientv3.LeaseID(id))
		if err != nil && rpctypes.Error(err) != rpctypes.ErrLeaseNotFound {
			return fmt.Errorf("cutover: revoke the lease of session %#x: %w", id, err)
		}
	}
	return nil
}

// ErrNoMarker is the error of a cutover on a prefix without a migration's import marker.
var ErrNoMarker = errors.New("cutover: the prefix holds no migration's import marker")

// PadPast puts the import marker again until etcd's revision is above zxid>>16, as Import pads:
// every zxid zetcd gives out afterwards (stat.go: revision<<16|index) is above zxid, and a
// client's lastZxidSeen up to zxid is not from zetcd's future.
func PadPast(ctx context.Context, cfg CutoverConfig, zxid int64) error {
	_, err := padPast(ctx, cfg.fill(), zxid)
	if err != nil && !errors.Is(err, ErrNoMarker) {
		err = fmt.Errorf("cutover: %w", err)
	}
	return err
}

// padPast is PadPast, for the cutover and the Mirror (whose copy keeps its zxids above
// ZooKeeper's across ZooKeeper's epochs): it returns how many revisions it padded.
func padPast(ctx context.Context, cfg CutoverConfig, zxid int64) (int64, error) {
	key := keySchema{prefix: cfg.Prefix}.importMarker()
	r, err := cfg.Client.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("read the import marker: %w", err)
	}
	if len(r.Kvs) == 0 {
		return 0, ErrNoMarker
	}
	marker := string(r.Kvs[0].Value)
	need := zxid>>16 + 1 - r.Header.Revision
	if need <= 0 {
		return 0, nil
	}
	cfg.Logger.Info("padding etcd's revision past ZooKeeper's zxids", zap.Int64("revisions", need),
		zap.String("zookeeper-zxid", fmt.Sprintf("%#x", zxid)))
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		done     atomic.Int64
	)
	next := make(chan struct{})
	for range min(need, 256) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if _, err := cfg.Client.Put(ctx, key, marker); err != nil {
					once.Do(func() { firstErr = err })
				} else {
					done.Add(1)
				}
			}
		}()
	}
feed:
	for range need {
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr = cmp.Or(firstErr, ctx.Err()); firstErr != nil {
		return done.Load(), fmt.Errorf("padding to revision %d: %w", zxid>>16+1, firstErr)
	}
	return done.Load(), nil
}

// EndMigration deletes the import marker and puts the fence, with zxids' table (ZxidTable), in
// one transaction: New serves the prefix from then on.
func EndMigration(ctx context.Context, cfg CutoverConfig, zxids ZxidTable) error {
	return EndMigrationIf(ctx, cfg, zxids, nil)
}

// EndMigrationIf is EndMigration in a transaction that also compares guard and does also: the
// agreement of several processes (cmd/zetcd) commits its cutover with the marker's deletion.
// ErrNoMarker: the marker is gone, or a guard failed.
func EndMigrationIf(ctx context.Context, cfg CutoverConfig, zxids ZxidTable, guard []clientv3.Cmp, also ...clientv3.Op) error {
	cfg = cfg.fill()
	keys := keySchema{prefix: cfg.Prefix}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(keys.importMarker()), ">", 0)}, guard...)
	ops := append([]clientv3.Op{clientv3.OpDelete(keys.importMarker()), clientv3.OpPut(keys.fence(), "0"),
		clientv3.OpPut(keys.migratedZxids(), string(zxids.encode()))}, also...)
	t, err := cfg.Client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("cutover: delete the import marker: %w", err)
	}
	if !t.Succeeded {
		return ErrNoMarker
	}
	return nil
}

// ImportMarker returns the value of the import marker of prefix, and whether there is one.
func ImportMarker(ctx context.Context, cli *clientv3.Client, prefix string) (string, bool, error) {
	r, err := cli.Get(ctx, keySchema{prefix: cmp.Or(prefix, "/zk/")}.importMarker())
	if err != nil || len(r.Kvs) == 0 {
		return "", false, err
	}
	return string(r.Kvs[0].Value), true, nil
}

// IsMirrorOf reports whether marker, an import marker's value, is a Mirror's of source
// (MirrorConfig.Source): a copy of that ZooKeeper.
func IsMirrorOf(marker, source string) bool {
	return strings.HasPrefix(marker, mirrorMarkerPrefix+source+" started ")
}

// ZxidTable tells zetcd's zxids for ZooKeeper's, for the relativeZxid of a setWatches from a
// client that last saw ZooKeeper: the copy's zxids are ZooKeeper's renumbered (mirror.go), so
// comparing a ZooKeeper zxid with them would fire watches on changes the client has seen, or
// miss ones it has not. Last is ZooKeeper's last zxid at the cutover, below every zxid zetcd
// gives out (PadPast); Zxids maps the ZooKeeper zxids clients are known to hold (each relayed
// session's newest) to the newest zetcd zxid of the transactions up to them.
type ZxidTable struct {
	Last  int64
	Zxids map[int64]encoding.Zxid
}

// migratedZxids is the key of a cutover's ZxidTable.
func (k keySchema) migratedZxids() string { return k.prefix + "z" }

func (t ZxidTable) encode() []byte {
	zks := slices.Sorted(maps.Keys(t.Zxids))
	b := binary.BigEndian.AppendUint64(nil, uint64(t.Last))
	for _, z := range zks {
		b = binary.BigEndian.AppendUint64(b, uint64(z))
		b = binary.BigEndian.AppendUint64(b, uint64(t.Zxids[z]))
	}
	return b
}

// zxidTable is a decoded ZxidTable, its ZooKeeper zxids in order.
type zxidTable struct {
	last      int64
	zk, zetcd []int64
}

func decodeZxidTable(b []byte) (*zxidTable, error) {
	if len(b) < 8 || (len(b)-8)%16 != 0 {
		return nil, errors.New("zetcd: corrupt table of migrated zxids")
	}
	t := &zxidTable{last: int64(binary.BigEndian.Uint64(b))}
	for b = b[8:]; len(b) > 0; b = b[16:] {
		t.zk = append(t.zk, int64(binary.BigEndian.Uint64(b)))
		t.zetcd = append(t.zetcd, int64(binary.BigEndian.Uint64(b[8:])))
	}
	return t, nil
}

// translate returns the zetcd zxid to compare with in place of rel: rel itself unless it is a
// ZooKeeper zxid (up to last); for one, the table's entry at or below it, 0 (everything
// changed since) if there is none: a watch fires rather than miss a change.
func (t *zxidTable) translate(rel encoding.Zxid) encoding.Zxid {
	if t == nil || int64(rel) > t.last || rel <= 0 {
		return rel
	}
	i, found := slices.BinarySearch(t.zk, int64(rel))
	switch {
	case found:
		return encoding.Zxid(t.zetcd[i])
	case i > 0:
		return encoding.Zxid(t.zetcd[i-1])
	}
	return 0
}

// loadMigratedZxids reads the table of a cutover into the prefix, if there was one.
func (b *Store) loadMigratedZxids(ctx context.Context) error {
	r, err := b.kv.Get(ctx, b.keys.migratedZxids())
	if err != nil {
		return fmt.Errorf("zetcd: read the migrated zxids: %w", err)
	}
	if len(r.Kvs) == 0 {
		return nil
	}
	t, err := decodeZxidTable(r.Kvs[0].Value)
	if err != nil {
		return err
	}
	b.migrated = t
	return nil
}
