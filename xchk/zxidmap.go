package xchk

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/zetcd/zetcd/encoding"
)

// maxZxidPairs bounds the pairs a zxidMap remembers; past it the oldest half is forgotten (a
// forgotten zxid is learned again, consistently with the pairs that remain, when next seen).
const maxZxidPairs = 1 << 14

// zxidMap pairs the zxids one session has seen on zetcd with those it saw at the same places on
// ZooKeeper. The two servers number transactions differently (etcd revisions vs epoch<<32 |
// counter, and zetcd writes revisions ZooKeeper does not, such as the session key on resume),
// so absolute values and gaps mean nothing; what must agree is identity and order. The map is
// an order-preserving bijection: a zxid pair (z, k) is accepted when z and k are either
// already paired with each other, or both new and in the same place relative to every pair
// already known (all known zetcd zxids below z pair with ZooKeeper zxids below k, and above
// with above). Zero pairs only with zero (system nodes, "no zxid").
//
// It catches what offsets from a session's first zxid catch — a mzxid that did not move, a
// pzxid left behind, a failed write that consumed no zxid, two writes sharing one — without
// false alarms from the extra revisions zetcd writes; it does not compare gap sizes.
//
// mu protects everything: a session's pair is shared by the connections that resume it.
type zxidMap struct {
	mu    sync.Mutex
	pairs []zxidPair // sorted by z (and therefore by k)
	byK   map[encoding.Zxid]encoding.Zxid
	// newest is the newest reply zxid the session got from each server (a read's too, which is
	// no pair: each server answers with its own newest): what a client that saw both replies
	// reports as the last zxid it saw, in each numbering.
	newest zxidPair
}

type zxidPair struct{ z, k encoding.Zxid }

func newZxidMap() *zxidMap { return &zxidMap{byK: make(map[encoding.Zxid]encoding.Zxid)} }

// pair checks that zetcd's z and ZooKeeper's k stand for the same transaction and records them.
// It returns "" when they do, otherwise why not.
func (m *zxidMap) pair(z, k encoding.Zxid) string {
	if z == 0 || k == 0 {
		if z == k {
			return ""
		}
		return "zero pairs only with zero"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := m.search(z)
	if found {
		if m.pairs[i].k == k {
			return ""
		}
		return fmt.Sprintf("zetcd %v was paired with zookeeper %v", z, m.pairs[i].k)
	}
	if z2, ok := m.byK[k]; ok {
		return fmt.Sprintf("zookeeper %v was paired with zetcd %v", k, z2)
	}
	if i > 0 && m.pairs[i-1].k > k {
		p := m.pairs[i-1]
		return fmt.Sprintf("order: zetcd %v > %v but zookeeper %v < %v", z, p.z, k, p.k)
	}
	if i < len(m.pairs) && m.pairs[i].k < k {
		p := m.pairs[i]
		return fmt.Sprintf("order: zetcd %v < %v but zookeeper %v > %v", z, p.z, k, p.k)
	}
	m.pairs = slices.Insert(m.pairs, i, zxidPair{z, k})
	m.byK[k] = z
	if len(m.pairs) > maxZxidPairs {
		drop := len(m.pairs) / 2
		for _, p := range m.pairs[:drop] {
			delete(m.byK, p.k)
		}
		m.pairs = slices.Delete(m.pairs, 0, drop)
	}
	return ""
}

// search returns the index of z in pairs, or where it would be inserted.
func (m *zxidMap) search(z encoding.Zxid) (int, bool) {
	return slices.BinarySearchFunc(m.pairs, z, func(p zxidPair, z encoding.Zxid) int { return cmp.Compare(p.z, z) })
}

// replied records the reply zxids of one request answered by both servers.
func (m *zxidMap) replied(z, k encoding.Zxid) {
	if z <= 0 || k <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.newest.z, m.newest.k = max(m.newest.z, z), max(m.newest.k, k)
}

// toZooKeeper translates a zetcd zxid (a client's lastZxidSeen or setWatches relativeZxid)
// into ZooKeeper's numbering: at or past the newest reply zxid the session got from zetcd (the
// client's connection raises its replies' zxids to the highest it sent, a ping's included),
// the newest it got from ZooKeeper; else its partner, else the partner of the newest known zxid
// below it, else 0 ("nothing seen").
func (m *zxidMap) toZooKeeper(z encoding.Zxid) encoding.Zxid {
	if z <= 0 {
		return z
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.newest.z > 0 && z >= m.newest.z {
		return m.newest.k
	}
	i, found := m.search(z)
	switch {
	case found:
		return m.pairs[i].k
	case i > 0:
		return m.pairs[i-1].k
	}
	return 0
}

// toZetcd is toZooKeeper the other way round, for ZooKeeper answers handed to a client whose
// session lives in zetcd's numbering.
func (m *zxidMap) toZetcd(k encoding.Zxid) encoding.Zxid {
	if k <= 0 {
		return k
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if z, ok := m.byK[k]; ok {
		return z
	}
	i, _ := slices.BinarySearchFunc(m.pairs, k, func(p zxidPair, k encoding.Zxid) int { return cmp.Compare(p.k, k) })
	if i > 0 {
		return m.pairs[i-1].z
	}
	return 0
}

// ownerMap pairs zetcd session ids with the ids of their ZooKeeper twins, for every session
// this process cross-checks, so ephemeralOwner can be compared across sessions. mu protects the
// maps.
type ownerMap struct {
	mu  sync.Mutex
	z2k map[encoding.SessionID]encoding.SessionID
	k2z map[encoding.SessionID]encoding.SessionID
}

func newOwnerMap() *ownerMap {
	return &ownerMap{z2k: make(map[encoding.SessionID]encoding.SessionID), k2z: make(map[encoding.SessionID]encoding.SessionID)}
}

func (o *ownerMap) add(z, k encoding.SessionID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.z2k[z] = k
	o.k2z[k] = z
}

func (o *ownerMap) remove(z encoding.SessionID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k, ok := o.z2k[z]; ok {
		delete(o.k2z, k)
	}
	delete(o.z2k, z)
}

// pair checks that zetcd's owner z and ZooKeeper's owner k are the same session. Owners this
// process does not know (sessions opened elsewhere) are learned, one to one.
func (o *ownerMap) pair(z, k encoding.SessionID) string {
	if z == 0 || k == 0 {
		if z == k {
			return ""
		}
		return "no owner on one side"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if k2, ok := o.z2k[z]; ok {
		if k2 == k {
			return ""
		}
		return fmt.Sprintf("zetcd session %v is twinned with zookeeper session %v", z, k2)
	}
	if z2, ok := o.k2z[k]; ok {
		return fmt.Sprintf("zookeeper session %v is the twin of zetcd session %v", k, z2)
	}
	o.z2k[z] = k
	o.k2z[k] = z
	return ""
}

// toZetcd maps a ZooKeeper session id to its zetcd twin, or returns it unchanged.
func (o *ownerMap) toZetcd(k encoding.SessionID) encoding.SessionID {
	o.mu.Lock()
	defer o.mu.Unlock()
	if z, ok := o.k2z[k]; ok {
		return z
	}
	return k
}
