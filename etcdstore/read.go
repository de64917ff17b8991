package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

// readNode reads one node from the replica, once it has reached the session's floor (see
// awaitTree). If arm names a watch for what was read (ok true), readNode arms it on reqPath,
// the request's own path, in the same read lock, at the state read: the replica cannot move on
// between the read and the watch, and the feed fires a revision only after applying it, so the
// watch fires for exactly the changes after the read, and its events follow the reply (the
// executor holds them until then). No change needs replaying and none catching up.
func (s *etcdSession) readNode(ctx context.Context, op, reqPath string, childNames bool, arm armFunc) (node, []string, encoding.Zxid, error) {
	path := znode.NormalizeRead(reqPath)
	if err := s.awaitTree(ctx, op, path); err != nil {
		return node{}, nil, 0, err
	}
	var (
		n        node
		children []string
		exists   bool
		err      error
	)
	rev := s.b.tree.read(func(v replicaView) {
		n, children, exists, err = v.node(path, childNames)
		if arm == nil || err != nil {
			return
		}
		if kind, ok := arm(n, exists); ok && !s.b.watches.Arm(s.watcher, kind, reqPath, v.zxid()) {
			err = errArmedBehind
		}
	})
	z := s.zxid(rev)
	if err != nil {
		return node{}, nil, z, fmt.Errorf("session %s: %s %q: %w", s.id, op, path, err)
	}
	if !exists {
		return node{}, nil, z, encoding.ErrNoNode
	}
	return n, children, z, nil
}

// armFunc decides, under the replica's read lock, whether a read sets a watch on what it read
// (exists: whether the node does; n is the node if it does), and of which kind.
type armFunc func(n node, exists bool) (watch.Kind, bool)

// errArmedBehind is a watch a read would arm behind the feed's progress: the replica was at a
// revision the feed had fired past, which applying before firing rules out.
var errArmedBehind = errors.New("zetcd: a read's watch would be armed behind the watch feed (a bug)")

// treeWaitLimit bounds how long a request waits for the replica to reach what it must see.
// Past it, etcd is out of reach or the feed is stalled, and the request is not served.
const treeWaitLimit = 2 * time.Second

// awaitTree waits until the replica has reached what a read must not go behind: the newest
// revision any session of this process has been answered with, so at least the session's own
// writes, its syncs and the zxid it resumed with (the watch events already delivered are the
// feed's progress, which the replica always reaches first). That is a ZooKeeper server's
// guarantee: a write acknowledged by a server is seen by every later read on that server (a
// follower applies a write before it acknowledges it); across zetcd processes, as across
// ZooKeeper servers, sync is the way. If the replica does not get there within treeWait (etcd
// unreachable, the feed stalled or reloading), the request fails with ErrNotServing: the
// connection is closed and the client resumes its session, here or on another zetcd, as a
// ZooKeeper follower that has lost its leader closes its clients' connections. op and path
// name the request in the error.
func (s *etcdSession) awaitTree(ctx context.Context, op, path string) error {
	if err := s.b.awaitFloor(ctx, s.lastRev); err != nil {
		return fmt.Errorf("session %s: %s %q: %w", s.id, op, path, err)
	}
	return nil
}

// ReadyToRead reports whether the replica has reached what awaitTree waits for: a read is then
// answered from it at once.
func (s *etcdSession) ReadyToRead() bool {
	return s.b.tree.revision() >= s.b.readFloor(s.lastRev)
}

// readFloor is the revision the replica must reach to answer a session whose floor is floor:
// that, and every revision this process has answered.
func (b *Store) readFloor(floor int64) int64 { return max(floor, b.newestAnswerRev()) }

// awaitFloor waits up to treeWait for the replica to reach floor and every revision this
// process has answered. It fails with ErrNotServing if the replica does not, or with ctx's
// error.
func (b *Store) awaitFloor(ctx context.Context, floor int64) error {
	return b.awaitTreeRevision(ctx, b.readFloor(floor))
}

// awaitTreeRevision waits up to treeWait for the replica to reach rev; see awaitFloor.
func (b *Store) awaitTreeRevision(ctx context.Context, rev int64) error {
	if b.tree.revision() >= rev {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, b.treeWait)
	defer cancel()
	err := b.awaitRevision(wctx, rev)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("the replica is at revision %d and has not reached %d within %v (%v): %w",
		b.tree.revision(), rev, b.treeWait, err, zetcd.ErrNotServing)
}

func (s *etcdSession) Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	if strings.IndexByte(req.Path, 0) >= 0 {
		return nil, s.zxid(0), encoding.ErrBadArguments
	}
	var arm armFunc
	if req.Watch {
		// An exists watch is set whether or not the node exists (DataTree.statNode), but not
		// on a node the session may not READ.
		arm = func(n node, exists bool) (watch.Kind, bool) {
			if !exists {
				return watch.Exist, true
			}
			return watch.Data, s.readAllowed(n, encoding.PermRead)
		}
	}
	n, _, z, err := s.readNode(ctx, "exists", req.Path, false, arm)
	if err != nil {
		return nil, z, err
	}
	if !s.readAllowed(n, encoding.PermRead) {
		// 3.9.2+: READ on a node that exists.
		return nil, z, encoding.ErrNoAuth
	}
	return &encoding.ExistsResponse{Stat: n.Stat}, z, nil
}

// armIfReadable is the armFunc of a read that sets a watch of kind if asked (set) on a node
// that exists and that the session may READ, as ZooKeeper's getData and getChildren do.
func (s *etcdSession) armIfReadable(set bool, kind watch.Kind) armFunc {
	if !set {
		return nil
	}
	return func(n node, exists bool) (watch.Kind, bool) {
		return kind, exists && s.readAllowed(n, encoding.PermRead)
	}
}

// readReadable is readNode of a node the session must READ (getData, getChildren): NoAuth if it
// may not, in which case no watch is set, as in ZooKeeper; else the watch of kind if set. A
// node without children lists none rather than null.
func (s *etcdSession) readReadable(ctx context.Context, op, path string, childNames, set bool, kind watch.Kind) (node, []string, encoding.Zxid, error) {
	n, children, z, err := s.readNode(ctx, op, path, childNames, s.armIfReadable(set, kind))
	if err != nil {
		return node{}, nil, z, err
	}
	if !s.readAllowed(n, encoding.PermRead) {
		return node{}, nil, z, encoding.ErrNoAuth
	}
	if childNames && children == nil {
		children = []string{}
	}
	return n, children, z, nil
}

func (s *etcdSession) GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	n, _, z, err := s.readReadable(ctx, "getData", req.Path, false, req.Watch, watch.Data)
	if err != nil {
		return nil, z, err
	}
	return &encoding.GetDataResponse{Data: n.Data, Stat: n.Stat}, z, nil
}

func (s *etcdSession) GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	n, _, z, err := s.readNode(ctx, "getACL", req.Path, false, nil)
	if err != nil {
		return nil, z, err
	}
	// READ or ADMIN; without ADMIN, digest ids are masked (FinalRequestProcessor).
	if !s.readAllowed(n, encoding.PermRead|encoding.PermAdmin) {
		return nil, z, encoding.ErrNoAuth
	}
	acl := n.Meta.ACL
	if !s.auth.Allowed(acl, encoding.PermAdmin) {
		acl = znode.MaskACL(acl)
	}
	return &encoding.GetACLResponse{ACL: acl, Stat: n.Stat}, z, nil
}

func (s *etcdSession) GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	n, children, z, err := s.readReadable(ctx, "getChildren2", req.Path, true, req.Watch, watch.Child)
	if err != nil {
		return nil, z, err
	}
	return &encoding.GetChildren2Response{Children: children, Stat: n.Stat}, z, nil
}

func (s *etcdSession) GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	_, children, z, err := s.readReadable(ctx, "getChildren", req.Path, true, req.Watch, watch.Child)
	if err != nil {
		return nil, z, err
	}
	return &encoding.GetChildrenResponse{Children: children}, z, nil
}

// Sync makes sure the session's later reads see every write committed before it, as
// ZooKeeper's sync brings the follower up to the leader: it learns etcd's current revision
// (one linearizable round trip), waits for the replica to reach it, and raises the session's
// floor to it.
func (s *etcdSession) Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	rev, err := s.b.currentRevision(ctx)
	if err != nil {
		return storeErr[encoding.SyncResponse](s, "sync", req.Path, err)
	}
	if err := s.b.awaitTreeRevision(ctx, rev); err != nil {
		return nil, 0, fmt.Errorf("session %s: sync %q: %w", s.id, req.Path, err)
	}
	return &encoding.SyncResponse{Path: req.Path}, s.zxid(rev), nil
}

// GetEphemerals (103) lists the session's ephemeral nodes, from the replica. Like ZooKeeper, a
// prefix that is blank or "/" (after trimming) selects all of them, any other prefix is matched
// as a string, not as a path ("/a" matches "/ab").
func (s *etcdSession) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	if err := s.awaitTree(ctx, "getEphemerals", req.PrefixPath); err != nil {
		return nil, 0, err
	}
	var all []string
	rev := s.b.tree.read(func(v replicaView) { all = v.ephemerals(int64(s.id)) })
	trimmed := strings.TrimFunc(req.PrefixPath, func(r rune) bool { return r <= ' ' })
	everything := trimmed == "" || trimmed == "/"
	paths := []string{}
	for _, p := range all {
		if everything || strings.HasPrefix(p, req.PrefixPath) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return &encoding.GetEphemeralsResponse{Ephemerals: paths}, s.zxid(rev), nil
}

// GetAllChildrenNumber (104) counts every descendant of a node, from the replica: the node's
// READ check, then its descendants counted along the children lists, at one revision. Like
// ZooKeeper, "/" counts every node but the root (3 on a fresh server) and "" counts one more
// (ZooKeeper's root alias).
func (s *etcdSession) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	path := znode.NormalizeRead(req.Path)
	if err := s.awaitTree(ctx, "getAllChildrenNumber", path); err != nil {
		return nil, 0, err
	}
	var (
		n     node
		ok    bool
		err   error
		total int64
	)
	rev := s.b.tree.read(func(v replicaView) {
		if n, _, ok, err = v.node(path, false); ok && err == nil {
			total = v.descendants(path)
		}
	})
	z := s.zxid(rev)
	if err != nil {
		return nil, z, fmt.Errorf("session %s: getAllChildrenNumber %q: %w", s.id, path, err)
	}
	if !ok {
		return nil, z, encoding.ErrNoNode
	}
	if !s.readAllowed(n, encoding.PermRead) {
		return nil, z, encoding.ErrNoAuth
	}
	if req.Path == "" {
		total++
	}
	return &encoding.GetAllChildrenNumberResponse{TotalNumber: int32(total)}, z, nil
}

// MultiRead runs getData and getChildren ops (22) independently at one state: each op that fails
// answers its code in place and the others still answer (FinalRequestProcessor). Any other op is
// MarshallingError, which in ZooKeeper consumes no zxid for multiRead. It reads the replica
// (one read lock, so one revision) once it has reached the session's floor (awaitTree).
func (s *etcdSession) MultiRead(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	for _, o := range req.Ops {
		switch o.Record.(type) {
		case *encoding.GetDataRequest, *encoding.GetChildrenRequest:
		default:
			return nil, s.zxid(0), encoding.ErrMarshallingError
		}
	}
	if len(req.Ops) == 0 {
		return &encoding.MultiResponse{}, s.zxid(0), nil
	}
	if err := s.awaitTree(ctx, "multiRead", ""); err != nil {
		return nil, 0, err
	}
	read := make([]readNodeResult, len(req.Ops))
	rev := s.b.tree.read(func(v replicaView) {
		for i, o := range req.Ops {
			r := &read[i]
			var children bool
			r.path, children = multiReadPath(o)
			r.n, r.children, r.exists, r.err = v.node(r.path, children)
		}
	})
	return s.multiReadAnswers(req, read, s.zxid(rev))
}

// readNodeResult is what a multiRead op read of its node: whether it exists, the node and, for
// getChildren, its children's names; err if its keys do not decode.
type readNodeResult struct {
	path     string
	exists   bool
	n        node
	children []string
	err      error
}

// multiReadPath is the node an op of a multiRead reads, and whether it lists its children.
func multiReadPath(o encoding.MultiOp) (string, bool) {
	switch r := o.Record.(type) {
	case *encoding.GetDataRequest:
		return znode.NormalizeRead(r.Path), false
	case *encoding.GetChildrenRequest:
		return znode.NormalizeRead(r.Path), true
	}
	return "", false
}

// multiReadAnswers answers each op of a multiRead from what it read.
func (s *etcdSession) multiReadAnswers(req *encoding.MultiRequest, read []readNodeResult, z encoding.Zxid) (*encoding.MultiResponse, encoding.Zxid, error) {
	resp := &encoding.MultiResponse{Results: make([]encoding.MultiResult, len(req.Ops))}
	for i, o := range req.Ops {
		if err := read[i].err; err != nil {
			return nil, z, fmt.Errorf("session %s: multiRead %v %q: %w", s.id, o.Op, read[i].path, err)
		}
		resp.Results[i] = s.multiReadAnswer(o, read[i])
	}
	return resp, z, nil
}

// multiReadAnswer answers one op: NoNode, NoAuth (READ), or its result.
func (s *etcdSession) multiReadAnswer(o encoding.MultiOp, read readNodeResult) encoding.MultiResult {
	if !read.exists {
		return encoding.MultiResult{Op: encoding.OpError, Err: encoding.ErrNoNode}
	}
	if !s.readAllowed(read.n, encoding.PermRead) {
		return encoding.MultiResult{Op: encoding.OpError, Err: encoding.ErrNoAuth}
	}
	if _, children := multiReadPath(o); children {
		names := read.children
		if names == nil {
			names = []string{}
		}
		return encoding.MultiResult{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenResponse{Children: names}}
	}
	return encoding.MultiResult{Op: encoding.OpGetData, Record: &encoding.GetDataResponse{Data: read.n.Data, Stat: read.n.Stat}}
}

// readAllowed checks READ (or another perm) on the ACL of the node a read returned.
func (s *etcdSession) readAllowed(n node, perm encoding.Perm) bool {
	return s.auth.Allowed(n.Meta.ACL, perm)
}
