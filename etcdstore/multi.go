package etcdstore

import (
	"context"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
)

// The multi engine: the overlay on which every create, delete, setData and multi is checked and
// from which its etcd writes are made; the committer (commit.go) runs it for a batch of writes.
//
//  1. Every node the ops touch (the op paths and the parents of creates and deletes) is read
//     from the replica at one revision (its keys as nodeKeys, and its number of children), once
//     the replica has reached the writes' floors; from etcd in one read Txn if it cannot.
//  2. The ops are simulated in order on an in-memory overlay of that state with ZooKeeper's
//     per-op checks (PrepRequestProcessor), so every op sees the effects of the earlier ones. The
//     outcome is either the failing op and its code, or each op's result and the final state of
//     every touched node.
//  3. The commit's compares pin every key that was read (its ModRevision, 0 for an absent key;
//     the child-create and child-delete keys of a parent move on every child create and delete,
//     so they pin its children too), and its writes are the difference between the state read
//     and the final state. A failed write changes nothing but consumes its zxid, as in
//     ZooKeeper. Either way the answer rests on a state etcd confirmed: a compare failing means
//     the state read was behind (a replica that had not applied a concurrent write yet): read
//     again once the replica has reached the failed commit's revision, and retry.
//
// A multi is one zxid for all its ops. A sequential create's name depends on its parent's create
// counter, so it is not known before the read: the check reads it from the replica while that is
// still at the revision of the read (multiState.lookup), and otherwise assumes it absent and
// guards that like a read key (and reads it for real after a conflict).

// pendingZxid stands for the zxid of the write numbered index in the commit's revision, in the
// Stats of simulated nodes, until the revision is known (patchZxid).
func pendingZxid(index uint16) encoding.Zxid { return encoding.Zxid(-1 - int64(index)) }

// mop is one op of a write multi as ZooKeeper 3.9 decodes it (see parseMulti), or a setACL,
// which is never one of a multi's ops (the committer gives it a batch of its own).
type mop struct {
	op      encoding.Op // OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpSetData, OpCheck or OpSetACL
	path    string
	data    []byte
	acl     []encoding.ACL
	flags   encoding.CreateMode
	ttl     int64 // -1 unless op is OpCreateTTL
	version int32
}

// multiRefusal says why ZooKeeper refuses a whole multi request with MarshallingError before
// looking at the tree, and whether the refusal consumes a zxid.
type multiRefusal int

const (
	multiAccepted multiRefusal = iota
	// multiRefusedTxn: ZooKeeper logs an error txn (one zxid), like a failed write.
	multiRefusedTxn
	// multiRefusedEarly: ZooKeeper fails before assigning a zxid.
	multiRefusedEarly
)

// parseMulti turns a multi's ops into mops the way ZooKeeper 3.9's MultiOperationRecord does,
// op by op, which retypes create ops by their flags (checked against ZooKeeper 3.9.6):
//   - create, create2, createContainer: invalid flags refuse the request (error txn); then a
//     null ACL list refuses it before any txn; then TTL flags refuse it (error txn); container
//     flags make a createContainer; else the opcode is kept.
//   - createTTL: TTL flags keep it; container flags make a createContainer; any other flags
//     (also invalid ones, which the create checks then refuse) make a plain create, ttl dropped.
//   - getData, getChildren: a read op among write ops, or a multi of read ops only, refuses the
//     request (error txn).
//
// The first refused op decides; then a null path in any op refuses the request (error txn).
func parseMulti(ops []encoding.MultiOp) ([]mop, multiRefusal) {
	out := make([]mop, 0, len(ops))
	reads := 0
	for _, o := range ops {
		m := mop{op: o.Op, ttl: -1, version: -1}
		switch r := o.Record.(type) {
		case *encoding.CreateRequest:
			switch {
			case !r.Flags.Valid():
				return nil, multiRefusedTxn
			case r.ACL == nil:
				return nil, multiRefusedEarly
			case r.Flags.IsTTL():
				return nil, multiRefusedTxn
			case r.Flags.IsContainer():
				m.op = encoding.OpCreateContainer
			}
			m.path, m.data, m.acl, m.flags = r.Path, r.Data, r.ACL, r.Flags
		case *encoding.CreateTTLRequest:
			m.path, m.data, m.acl, m.flags = r.Path, r.Data, r.ACL, r.Flags
			switch {
			case r.Flags.IsTTL():
				m.ttl = r.TTL
			case r.Flags.IsContainer():
				m.op = encoding.OpCreateContainer
			default:
				m.op = encoding.OpCreate
			}
		case *encoding.DeleteRequest:
			m.path, m.version = r.Path, r.Version
		case *encoding.SetDataRequest:
			m.path, m.data, m.version = r.Path, r.Data, r.Version
		case *encoding.CheckVersionRequest:
			m.path, m.version = r.Path, r.Version
		default: // getData, getChildren
			if len(out) > 0 {
				return nil, multiRefusedTxn
			}
			reads++
			continue
		}
		if reads > 0 {
			return nil, multiRefusedTxn
		}
		out = append(out, m)
	}
	if reads > 0 {
		return nil, multiRefusedTxn
	}
	// ZooKeeper looks up every op's path before it checks the first op, which a null path
	// (encoding.NullString) fails with MarshallingError, in an error txn.
	for _, m := range out {
		if m.path == encoding.NullString {
			return nil, multiRefusedTxn
		}
	}
	return out, multiAccepted
}

// patchZxid replaces the pending zxids in a Stat by the zxids of the commit's revision rev.
func patchZxid(st *encoding.Stat, rev int64) {
	for _, f := range []*encoding.Zxid{&st.Czxid, &st.Mzxid, &st.Pzxid} {
		if *f < 0 {
			*f = zxidOf(rev, int(-1-*f))
		}
	}
}

// runMulti executes ops as one write at one zxid, through the committer (commit.go). On
// success failed is 0 and results hold each op's result; when an op fails, failed is its code
// and results are ZooKeeper's error list (0 before it, its code, RuntimeInconsistency after it).
// err is set only when the request could not be served (etcd unreachable; a vanished session
// is SessionExpired).
func (s *etcdSession) runMulti(ctx context.Context, opName string, ops []mop) (results []encoding.MultiResult, failed encoding.ErrCode, z encoding.Zxid, err error) {
	return s.runWrite(ctx, &pendingWrite{s: s, opName: opName, ops: ops})
}

// runWrite is runMulti of w's ops.
func (s *etcdSession) runWrite(ctx context.Context, w *pendingWrite) (results []encoding.MultiResult, failed encoding.ErrCode, z encoding.Zxid, err error) {
	opName, ops := w.opName, w.ops
	w.floor = s.lastRev
	o := s.b.commits.submit(ctx, w)
	if o.err != nil {
		path := ""
		if len(ops) > 0 {
			path = ops[0].path
		}
		z, err := s.etcdFailure(opName, path, o.err)
		return nil, 0, z, err
	}
	return o.results, o.failed, s.writeZxid(o.rev, o.index), nil
}

// errorResults is a failed multi's reply: ok for the ops before the failed one, its code for
// it, RuntimeInconsistency for the ops after it, as ZooKeeper answers.
func errorResults(n, failedAt int, failed encoding.ErrCode) []encoding.MultiResult {
	results := make([]encoding.MultiResult, n)
	for i := range results {
		switch {
		case i < failedAt:
			results[i] = encoding.MultiResult{Op: encoding.OpError, Err: encoding.ErrOK}
		case i == failedAt:
			results[i] = encoding.MultiResult{Op: encoding.OpError, Err: failed}
		default:
			results[i] = encoding.MultiResult{Op: encoding.OpError, Err: encoding.ErrRuntimeInconsistency}
		}
	}
	return results
}

// committedMulti puts the zxids of the commit's revision rev in the Stats of a multi's results.
func committedMulti(results []encoding.MultiResult, rev int64) {
	for i := range results {
		switch rec := results[i].Record.(type) {
		case *encoding.Create2Response:
			patchZxid(&rec.Stat, rev)
		case *encoding.SetDataResponse:
			patchZxid(&rec.Stat, rev)
		case *encoding.SetACLResponse:
			patchZxid(&rec.Stat, rev)
		}
	}
}

// appendJournal appends to out a successful multi's changes in op order, as ZooKeeper fires
// their watches, with the ACL each create gave its node (the ACL fixup again, with the same
// identities), as the changes of the write numbered index in its revision.
func appendJournal(out []journalChange, ops []mop, results []encoding.MultiResult, index uint16, auth *znode.Identities, p znode.Providers) []journalChange {
	for i, o := range ops {
		switch o.op {
		case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
			path := o.path
			switch r := results[i].Record.(type) {
			case *encoding.CreateResponse:
				path = r.Path
			case *encoding.Create2Response:
				path = r.Path
			}
			acl, _ := auth.FixupACL(o.acl, p)
			out = append(out, journalChange{watch.Change{Kind: watch.Created, Path: path, CreatedACL: acl}, index})
		case encoding.OpDelete:
			out = append(out, journalChange{watch.Change{Kind: watch.Deleted, Path: o.path}, index})
		case encoding.OpSetData:
			out = append(out, journalChange{watch.Change{Kind: watch.DataChanged, Path: o.path}, index})
		}
	}
	return out
}

// Multi runs a write multi (14): all ops or none, at one zxid (PrepRequestProcessor). A failed
// multi is answered with header err 0 and the per-op error list.
func (s *etcdSession) Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	ops, refused := parseMulti(req.Ops)
	switch refused {
	case multiRefusedTxn:
		z, err := s.fail(ctx, "multi", "", encoding.ErrMarshallingError)
		return nil, z, err
	case multiRefusedEarly:
		return nil, s.zxid(0), encoding.ErrMarshallingError
	}
	results, failed, z, err := s.runMulti(ctx, "multi", ops)
	if err != nil {
		return nil, z, err
	}
	if failed == encoding.ErrMarshallingError {
		// An op's check dereferenced a null in ZooKeeper's code (znode.FixupACL): it fails the
		// whole request, at the zxid the failed multi took, not that op alone.
		return nil, z, failed
	}
	return &encoding.MultiResponse{Results: results}, z, nil
}

// singleWrite runs one single-op write through the committer and answers it as the single op.
func (s *etcdSession) singleWrite(ctx context.Context, opName string, o mop) (encoding.MultiResult, encoding.Zxid, error) {
	w := &pendingWrite{s: s, opName: opName, one: [1]mop{o}}
	w.ops = w.one[:] // in the write's own allocation
	results, failed, z, err := s.runWrite(ctx, w)
	if err != nil {
		return encoding.MultiResult{}, z, err
	}
	if failed != 0 {
		return encoding.MultiResult{}, z, failed
	}
	return results[0], z, nil
}
