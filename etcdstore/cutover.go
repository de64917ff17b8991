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

// EndMigration deletes the import marker and puts the fence: New serves the prefix from then
// on. The copy's table of zxids (ZxidTable) goes first, in chunks each put while the marker is
// there, and its head in the marker's deleting transaction, so that a store sees all of the
// table or none.
func EndMigration(ctx context.Context, cfg CutoverConfig, zxids ZxidTable) error {
	return EndMigrationIf(ctx, cfg, zxids, nil)
}

// EndMigrationIf is EndMigration in a transaction that also compares guard and does also: the
// agreement of several processes (cmd/zetcd) commits its cutover with the marker's deletion.
// ErrNoMarker: the marker is gone, or a guard failed.
func EndMigrationIf(ctx context.Context, cfg CutoverConfig, zxids ZxidTable, guard []clientv3.Cmp, also ...clientv3.Op) error {
	cfg = cfg.fill()
	keys := keySchema{prefix: cfg.Prefix}
	head, chunks, err := zxids.encode()
	if err != nil {
		return err
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(keys.importMarker()), ">", 0)}, guard...)
	for i, c := range chunks {
		t, err := cfg.Client.Txn(ctx).If(cmps...).Then(clientv3.OpPut(keys.migratedZxidsChunk(i), string(c))).Commit()
		if err != nil {
			return fmt.Errorf("cutover: write the table of zxids: %w", err)
		}
		if !t.Succeeded {
			return ErrNoMarker
		}
	}
	ops := append([]clientv3.Op{clientv3.OpDelete(keys.importMarker()), clientv3.OpPut(keys.fence(), "0"),
		clientv3.OpPut(keys.migratedZxids(), string(head)),
		// Chunks past the table's, left by a cutover that failed with a longer table.
		clientv3.OpDelete(keys.migratedZxidsChunk(len(chunks)), clientv3.WithRange(keys.migratedZxidsEnd()))}, also...)
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

// ZxidTable is every ZooKeeper zxid a migration's copy wrote and the zetcd zxid it wrote it
// as (mirror.go numbers them again, in order). A store serving the copy shows ZooKeeper's
// zxids in every Stat through it (zxidTable.zooKeeper), so that a client sees the very zxids
// ZooKeeper gave it: Kafka takes a broker's epoch from its registration's czxid, and caches
// tell a change by a node's mzxid. Last is ZooKeeper's last zxid at the cutover, below every
// zxid zetcd gives out afterwards (PadPast).
type ZxidTable struct {
	Last  int64
	Zxids map[int64]encoding.Zxid
}

// The table's keys (keys.go, "P z"): a head, and chunks of pairs of at most
// zxidChunkBytes each, well within etcd's request limit (1.5 MiB by default), however many
// zxids a large copy holds.
func (k keySchema) migratedZxids() string { return k.prefix + "z" }

func (k keySchema) migratedZxidsChunk(i int) string {
	return fmt.Sprintf("%sz/%08x", k.prefix, i)
}

// migratedZxidsEnd is the end of the range of the chunk keys.
func (k keySchema) migratedZxidsEnd() string { return k.prefix + "z0" }

const (
	zxidChunkBytes = 1 << 20
	// zxidTableFormat begins the head's value.
	zxidTableFormat = 1
)

// encode returns the table's head and chunks. The head is the format byte and three
// big-endian int64s: Last, the copy's last zetcd zxid, the number of chunks. A chunk is pairs
// of uvarints, each the step from the pair before (the chunk's first from 0, 0) to the next
// ZooKeeper zxid and its zetcd zxid: both rise together, so the steps are short. The pair of
// zxid 0 (the system nodes') is implicit.
func (t ZxidTable) encode() (head []byte, chunks [][]byte, err error) {
	zks := slices.Sorted(maps.Keys(t.Zxids))
	var chunk []byte
	var prevZK, prevZetcd, lastZetcd int64
	for _, zk := range zks {
		z := int64(t.Zxids[zk])
		if zk <= 0 {
			continue
		}
		if z <= lastZetcd {
			return nil, nil, fmt.Errorf("cutover: the copy wrote ZooKeeper zxid %#x as %#x, not above %#x, an earlier zxid's: the zxids' order is lost", zk, z, lastZetcd)
		}
		lastZetcd = z
		if len(chunk) > zxidChunkBytes-2*binary.MaxVarintLen64 {
			chunks, chunk, prevZK, prevZetcd = append(chunks, chunk), nil, 0, 0
		}
		chunk = binary.AppendUvarint(chunk, uint64(zk-prevZK))
		chunk = binary.AppendUvarint(chunk, uint64(z-prevZetcd))
		prevZK, prevZetcd = zk, z
	}
	if len(chunk) > 0 {
		chunks = append(chunks, chunk)
	}
	head = []byte{zxidTableFormat}
	for _, v := range []int64{t.Last, lastZetcd, int64(len(chunks))} {
		head = binary.BigEndian.AppendUint64(head, uint64(v))
	}
	return head, chunks, nil
}

// zxidTable is a decoded ZxidTable: the pairs in order, both rising, zetcd's zxids up to
// copyLast.
type zxidTable struct {
	last      encoding.Zxid // ZooKeeper's last zxid at the cutover
	copyLast  encoding.Zxid // the copy's last zetcd zxid
	zk, zetcd []encoding.Zxid
}

// errCorruptZxidTable marks a table of migrated zxids that cannot be right.
var errCorruptZxidTable = errors.New("corrupt table of migrated zxids (keys.go, \"P z\")")

// decodeZxidHead decodes the head's value: the table with no pairs yet, and the chunk count.
func decodeZxidHead(b []byte) (*zxidTable, int, error) {
	if len(b) != 25 || b[0] != zxidTableFormat {
		return nil, 0, fmt.Errorf("zetcd: %w: a head of %d bytes", errCorruptZxidTable, len(b))
	}
	f := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	n := f(2)
	if n < 0 || n > 1<<31 {
		return nil, 0, fmt.Errorf("zetcd: %w: %d chunks", errCorruptZxidTable, n)
	}
	return &zxidTable{last: encoding.Zxid(f(0)), copyLast: encoding.Zxid(f(1))}, int(n), nil
}

// addChunk appends one chunk's pairs; each must rise above the one before.
func (t *zxidTable) addChunk(b []byte) error {
	var zk, z encoding.Zxid
	for len(b) > 0 {
		dzk, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("zetcd: %w: a chunk does not decode", errCorruptZxidTable)
		}
		b = b[n:]
		dz, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("zetcd: %w: a chunk does not decode", errCorruptZxidTable)
		}
		b = b[n:]
		zk, z = zk+encoding.Zxid(dzk), z+encoding.Zxid(dz)
		if k := len(t.zk); k > 0 && (zk <= t.zk[k-1] || z <= t.zetcd[k-1]) || zk <= 0 || z <= 0 {
			return fmt.Errorf("zetcd: %w: ZooKeeper zxid %#x as %#x out of order", errCorruptZxidTable, zk, z)
		}
		t.zk, t.zetcd = append(t.zk, zk), append(t.zetcd, z)
	}
	return nil
}

// zooKeeper returns the zxid a Stat shows for zetcd zxid z: ZooKeeper's for a zxid the copy
// wrote (up to copyLast), z itself for zetcd's own later ones, which are above every ZooKeeper
// zxid (PadPast), and 0 for 0. ok is false for a zxid of the copy the table does not hold.
func (t *zxidTable) zooKeeper(z encoding.Zxid) (_ encoding.Zxid, ok bool) {
	if t == nil || z <= 0 || z > t.copyLast {
		return z, true
	}
	i, found := slices.BinarySearch(t.zetcd, z)
	if !found {
		return z, false
	}
	return t.zk[i], true
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
	t, n, err := decodeZxidHead(r.Kvs[0].Value)
	if err != nil {
		return err
	}
	for i := range n {
		c, err := b.kv.Get(ctx, b.keys.migratedZxidsChunk(i))
		if err != nil {
			return fmt.Errorf("zetcd: read the migrated zxids: %w", err)
		}
		if len(c.Kvs) == 0 {
			return fmt.Errorf("zetcd: %w: chunk %q of %d missing", errCorruptZxidTable, b.keys.migratedZxidsChunk(i), n)
		}
		if err := t.addChunk(c.Kvs[0].Value); err != nil {
			return err
		}
	}
	if k := len(t.zetcd); k > 0 && t.zetcd[k-1] != t.copyLast || k == 0 && t.copyLast != 0 {
		return fmt.Errorf("zetcd: %w: its pairs do not end at the copy's last zxid %#x", errCorruptZxidTable, t.copyLast)
	}
	b.migrated = t
	return nil
}
