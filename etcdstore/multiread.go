package etcdstore

import (
	"context"
	"fmt"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// MultiRead runs getData and getChildren ops (22) independently at one state: each op that fails
// answers its code in place and the others still answer (PROTOCOL.md §3.4). Any other op is
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
