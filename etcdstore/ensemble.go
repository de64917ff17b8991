package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/zetcd"
)

// The ensemble as clients see it: every process stores in its process key (keys.go) the client
// addresses it advertises, and with Config.PublishEnsemble the elected leader keeps
// /zookeeper/config listing the live processes in ZooKeeper's dynamic config format, as
// QuorumVerifier.toString writes it and QuorumMaj(Properties) reads it:
//
//	server.<N>=<host>:2888:3888:participant;<host>:<port>
//	version=<hex>
//
// A client that follows the node takes each server's client address, the part after ';', into
// its new connect string (the Java client's updateServerList). The quorum address is the client host with ZooKeeper's
// conventional quorum and election ports, which zetcd does not serve: QuorumServer requires
// them, and no client connects to them. N is kept for as long as the process stays listed; a
// new one gets the lowest N free. The version moves by one with each change of the list and
// only then; the node's Stat (mzxid, version) moves with it and its watchers get
// NodeDataChanged.
//
// An address is listed once it has been live for the grace (Config.EnsembleGrace) and dropped
// once it has been absent for the grace, so a process restarted within it does not churn the
// clients. The leader that does not publish empties the node if a publishing leader wrote it
// (the ensemble key, keys.go, says so), so the node never names processes nobody keeps.

const (
	// DefaultEnsembleGrace is Config.EnsembleGrace's default.
	DefaultEnsembleGrace = 30 * time.Second
	// configPath is ZooKeeper's ZooDefs.CONFIG_NODE.
	configPath = "/zookeeper/config"
	// quorumPorts are written as each server's quorum and election ports (see above).
	quorumPorts = "2888:3888"
)

// CheckAdvertiseAddr checks that addr is a host:port a client elsewhere can connect to: a
// wildcard (0.0.0.0, ::) or empty host names no process to a client, and a published one would
// cut clients off.
func CheckAdvertiseAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("advertised client address %q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("advertised client address %q has no host: clients need one to connect to", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("advertised client address %q is a wildcard address, which clients cannot connect to: advertise this host's name or IP address", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("advertised client address %q: port must be 1-65535", addr)
	}
	return nil
}

// encodeProcessValue is a process key's value: the advertised client addresses, one a line.
func encodeProcessValue(addrs []string) string { return strings.Join(addrs, "\n") }

// decodeProcessValue inverts encodeProcessValue; an empty value advertises nothing.
func decodeProcessValue(v []byte) []string {
	var addrs []string
	for _, a := range strings.Split(string(v), "\n") {
		if a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// ensemble is a published list: each client address and its server id N.
type ensemble map[string]int64

// formatEnsemble writes e and version as /zookeeper/config's data; an empty list is empty data.
func formatEnsemble(e ensemble, version uint64) []byte {
	if len(e) == 0 {
		return []byte{}
	}
	addrs := make([]string, 0, len(e))
	for a := range e {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, func(a, b string) int { return int(e[a] - e[b]) })
	var sb strings.Builder
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		fmt.Fprintf(&sb, "server.%d=%s:%s:participant;%s\n", e[a], bracketIPv6(host), quorumPorts, a)
	}
	fmt.Fprintf(&sb, "version=%x", version)
	return []byte(sb.String())
}

// bracketIPv6 writes an IPv6 host as QuorumServer reads it in a host:port:port address.
func bracketIPv6(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// parseEnsemble reads /zookeeper/config's data: the server lines' client addresses with their
// ids, and the version (0 if none). Lines it does not understand are left out: data written by
// a ZooKeeper (an imported tree) may name servers without a client address.
func parseEnsemble(data []byte) (ensemble, uint64) {
	e := ensemble{}
	var version uint64
	for _, line := range strings.Split(string(data), "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		if key == "version" {
			version, _ = strconv.ParseUint(val, 16, 64)
			continue
		}
		idText, ok := strings.CutPrefix(key, "server.")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(idText, 10, 64)
		_, client, ok := strings.Cut(val, ";")
		if err != nil || !ok {
			continue
		}
		if _, _, err := net.SplitHostPort(client); err == nil {
			e[client] = id
		}
	}
	return e, version
}

// ensembleTracker decides, on the leader, when an address is listed or dropped.
type ensembleTracker struct {
	grace   time.Duration
	present map[string]time.Time // live address → live without a break since
	absent  map[string]time.Time // listed address not live → absent without a break since
}

func newEnsembleTracker(grace time.Duration) *ensembleTracker {
	return &ensembleTracker{grace: grace, present: map[string]time.Time{}, absent: map[string]time.Time{}}
}

// next is the list to publish at now, given the published one and the live addresses: a live
// address joins once live for the grace, a listed one leaves once absent for the grace.
func (t *ensembleTracker) next(published ensemble, live map[string]bool, now time.Time) ensemble {
	for a := range live {
		if _, ok := t.present[a]; !ok {
			t.present[a] = now
		}
		delete(t.absent, a)
	}
	for a := range t.present {
		if !live[a] {
			delete(t.present, a)
		}
	}
	for a := range t.absent {
		if _, ok := published[a]; !ok {
			delete(t.absent, a)
		}
	}
	out := ensemble{}
	for a, id := range published {
		if !live[a] {
			if _, ok := t.absent[a]; !ok {
				t.absent[a] = now
			}
			if now.Sub(t.absent[a]) >= t.grace {
				continue
			}
		}
		out[a] = id
	}
	var joining []string
	for a, since := range t.present {
		if _, ok := out[a]; !ok && now.Sub(since) >= t.grace {
			joining = append(joining, a)
		}
	}
	slices.Sort(joining)
	for _, a := range joining {
		out[a] = lowestFreeID(out)
	}
	return out
}

// lowestFreeID is the smallest server id from 1 that e does not use.
func lowestFreeID(e ensemble) int64 {
	used := map[int64]bool{}
	for _, id := range e {
		used[id] = true
	}
	id := int64(1)
	for used[id] {
		id++
	}
	return id
}

// ensembleTick is how often the leader looks at the live processes: often enough that a change
// is published within a second of its grace ending.
func ensembleTick(grace time.Duration) time.Duration {
	return min(max(grace/4, 100*time.Millisecond), time.Second)
}

// leadEnsemble keeps /zookeeper/config (see above) until ctx ends (leadership lost or backend
// closed). A leader that does not publish looks once, to empty a list a publishing leader left.
func (b *Store) leadEnsemble(ctx context.Context) {
	ctx = zetcd.WithOpLabel(ctx, zetcd.OpLabelOther)
	tr := newEnsembleTracker(b.ensembleGrace)
	t := time.NewTicker(ensembleTick(b.ensembleGrace))
	defer t.Stop()
	for {
		err := b.publishEnsembleOnce(ctx, tr)
		if err != nil && ctx.Err() == nil {
			b.log.Warn("ensemble: cannot update /zookeeper/config", zap.Error(err))
		}
		if err == nil && !b.publishEnsemble.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publishEnsembleOnce reads the live processes and /zookeeper/config at one revision and writes
// the node if its list must change, guarded by the node's ModRevision: a write that lost to
// another is redone on the next tick from what etcd then holds.
func (b *Store) publishEnsembleOnce(ctx context.Context, tr *ensembleTracker) error {
	r, err := b.kv.Txn(ctx).Then(
		clientv3.OpGet(b.keys.data(configPath)),
		clientv3.OpGet(b.keys.processKeysPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(b.keys.ensemble(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return err
	}
	nodeKVs := r.Responses[0].GetResponseRange().Kvs
	if len(nodeKVs) == 0 {
		return errors.New("/zookeeper/config has no data key")
	}
	node := nodeKVs[0]
	data, _, ix, meta, err := decodeDataValue(node.Value)
	if err != nil {
		return err
	}
	ours := r.Responses[2].GetResponseRange().Count > 0
	published, version := parseEnsemble(data)
	var next ensemble
	if b.publishEnsemble.Load() {
		live := map[string]bool{}
		for _, kv := range r.Responses[1].GetResponseRange().Kvs {
			if addrs := decodeProcessValue(kv.Value); len(addrs) > 0 {
				live[addrs[0]] = true
			}
		}
		next = tr.next(published, live, time.Now())
		if maps.Equal(next, published) && (ours || len(next) == 0) {
			return nil
		}
	} else if !ours {
		return nil
	}
	newData := formatEnsemble(next, version+1)
	m, err := decodeACLValue(meta, nil)
	if err != nil {
		return err
	}
	marker := clientv3.OpDelete(b.keys.ensemble())
	if len(next) > 0 {
		marker = clientv3.OpPut(b.keys.ensemble(), "")
	}
	w, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(node.Key)), "=", node.ModRevision)).
		Then(clientv3.OpPut(string(node.Key), encodeDataValue(newData, b.nowMs(), zxidIndexes{czxid: ix.czxid}, m)),
			marker, b.fenceOp()).Commit()
	if err != nil || !w.Succeeded {
		return err
	}
	b.log.Info("ensemble: /zookeeper/config updated", zap.Int("servers", len(next)),
		zap.String("config", string(newData)), zap.Stringer("zxid", zxidOf(w.Header.Revision, 0)))
	return nil
}
