package zkdata

import (
	"errors"
	"fmt"

	"github.com/zetcd/zetcd/encoding"
)

// Transaction records of zookeeper.jute, as SerializeUtils.deserializeTxn reads them from a log
// entry: a TxnHeader, the record its type names, and, in 3.6 and later, a TxnDigest, which is
// not compared and so not decoded.

type txnHeader struct {
	clientID int64
	cxid     int32
	zxid     int64
	time     int64
	typ      encoding.Op
}

// createTxn is CreateTxn, CreateTxnV0 (parentCVersion -1), CreateContainerTxn (owner
// ContainerOwner) and CreateTTLTxn (owner from the TTL): the owner is worked out at decoding
// except for CreateTxn's ephemeral flag, which needs the header's session.
type createTxn struct {
	path           string
	data           []byte
	acl            []encoding.ACL
	ephemeral      bool
	parentCVersion int32
	owner          int64 // ContainerOwner or a TTL's, else 0
}

type deleteTxn struct{ path string }

type setDataTxn struct {
	path    string
	data    []byte
	version int32
}

type setACLTxn struct {
	path    string
	acl     []encoding.ACL
	version int32
}

type checkTxn struct{ path string }

type errorTxn struct{ err int32 }

type createSessionTxn struct{ timeout int32 }

// closeSessionTxn is CloseSessionTxn; a closeSession without one (3.5 and older) is a nil
// record.
type closeSessionTxn struct{ paths []string }

type subTxn struct {
	typ  encoding.Op
	data []byte
}

type multiTxn struct{ txns []subTxn }

// decodeEntry decodes a log entry's bytes into its header and record.
func decodeEntry(b []byte) (txnHeader, any, error) {
	d := encoding.NewDecoder(b)
	var h txnHeader
	h.clientID = d.Int64()
	h.cxid = d.Int32()
	h.zxid = d.Int64()
	h.time = d.Int64()
	h.typ = encoding.Op(d.Int32())
	if err := d.Err(); err != nil {
		return h, nil, fmt.Errorf("txn header: %w", err)
	}
	body := b[len(b)-d.Remaining():]
	rec, err := decodeRecord(h.typ, body, true)
	if err != nil {
		return h, nil, fmt.Errorf("zxid %#x, type %d: %w", h.zxid, h.typ, err)
	}
	return h, rec, nil
}

// decodeRecord decodes the record of a txn of type typ, at the top of an entry (top) or inside
// a multi. Bytes after the record (a TxnDigest) are ignored.
func decodeRecord(typ encoding.Op, b []byte, top bool) (any, error) {
	d := encoding.NewDecoder(b)
	var rec any
	switch typ {
	case encoding.OpCreate, encoding.OpCreate2:
		c := &createTxn{path: path(d), data: d.Buffer(), acl: acls(d), ephemeral: d.Bool(), parentCVersion: d.Int32()}
		if errors.Is(d.Err(), encoding.ErrShortBuffer) && typ == encoding.OpCreate && top {
			return createV0(b) // SerializeUtils.deserializeTxn's fallback for CreateTxnV0
		}
		rec = c
	case encoding.OpCreateContainer:
		rec = &createTxn{path: path(d), data: d.Buffer(), acl: acls(d), parentCVersion: d.Int32(), owner: ContainerOwner}
	case encoding.OpCreateTTL:
		c := &createTxn{path: path(d), data: d.Buffer(), acl: acls(d), parentCVersion: d.Int32()}
		ttl := d.Int64()
		if d.Err() == nil {
			owner, ok := TTLOwner(ttl)
			if !ok {
				return nil, fmt.Errorf("createTTL %s: TTL %d out of range", c.path, ttl)
			}
			c.owner = owner
		}
		rec = c
	case encoding.OpDelete, encoding.OpDeleteContainer:
		rec = &deleteTxn{path: path(d)}
	case encoding.OpSetData, encoding.OpReconfig:
		if typ == encoding.OpReconfig && !top {
			return nil, fmt.Errorf("invalid type of op %d in a multi", typ)
		}
		rec = &setDataTxn{path: path(d), data: d.Buffer(), version: d.Int32()}
	case encoding.OpSetACL:
		if !top {
			return nil, fmt.Errorf("invalid type of op %d in a multi", typ)
		}
		rec = &setACLTxn{path: path(d), acl: acls(d), version: d.Int32()}
	case encoding.OpCheck:
		c := &checkTxn{path: path(d)}
		d.Int32() // version
		rec = c
	case encoding.OpError:
		rec = &errorTxn{err: d.Int32()}
	case encoding.OpCreateSession:
		if !top {
			return nil, fmt.Errorf("invalid type of op %d in a multi", typ)
		}
		rec = &createSessionTxn{timeout: d.Int32()}
	case encoding.OpCloseSession:
		if !top {
			return nil, fmt.Errorf("invalid type of op %d in a multi", typ)
		}
		paths := d.Strings()
		if d.Err() != nil {
			return nil, nil // a closeSession logged before CloseSessionTxn existed
		}
		rec = &closeSessionTxn{paths: paths}
	case encoding.OpMulti:
		if !top {
			return nil, fmt.Errorf("invalid type of op %d in a multi", typ)
		}
		rec = multi(d)
	default:
		return nil, fmt.Errorf("unsupported txn type %d", typ)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return rec, nil
}

// createV0 decodes a CreateTxnV0, which has no parentCVersion.
func createV0(b []byte) (any, error) {
	d := encoding.NewDecoder(b)
	c := &createTxn{path: path(d), data: d.Buffer(), acl: acls(d), ephemeral: d.Bool(), parentCVersion: -1}
	return c, d.Err()
}

func multi(d *encoding.Decoder) *multiTxn {
	n := d.VectorLen(8)
	m := &multiTxn{txns: make([]subTxn, 0, max(n, 0))}
	for range n {
		m.txns = append(m.txns, subTxn{typ: encoding.Op(d.Int32()), data: d.Buffer()})
	}
	return m
}

// path reads a path; a null one reads as "", which no node has.
func path(d *encoding.Decoder) string { return d.String() }

// acls reads a vector<ACL>; null stays nil, which DataTree stores as the open ACL
// (ReferenceCountedACLCache.convertAcls).
func acls(d *encoding.Decoder) []encoding.ACL {
	n := d.VectorLen(12)
	if n < 0 {
		return nil
	}
	a := make([]encoding.ACL, n)
	for i := range a {
		a[i].Decode(d)
	}
	return a
}
