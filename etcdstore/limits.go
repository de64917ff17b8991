package etcdstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// Requests over etcd's limits. A request ZooKeeper accepts (up to jute.maxbuffer, 1 MiB) can make
// an etcd request several times larger, or a transaction of many operations (a multi, a session
// close deleting many ephemerals). The embedded etcd takes them all (embedetcd.MaxRequestBytes,
// MaxTxnOps); an external etcd refuses what exceeds its --max-request-bytes (1.5 MiB by default)
// or --max-txn-ops (128). The client is then answered
//
//	SystemError (-1)
//
// and keeps its connection and session. ZooKeeper itself would have served the request, so no
// ZooKeeper answer is exactly right; SystemError is the one that says what happened: the range
// below -100 (APIError and the codes under it: NoNode, NodeExists, BadArguments, ...) reports an
// outcome of the request under ZooKeeper's rules, while -1..-99 are "system and server-side
// errors", and this is the server's configuration. It claims nothing about the node. Neither
// ZooKeeper's Java client nor Curator retries it (Curator's RetryLoop retries ConnectionLoss,
// OperationTimeout, SessionMoved, SessionExpired and NewConfigNoQuorum only): the same request
// would be refused again. Closing the connection instead (what a Go error does) reads to clients
// as ConnectionLoss, which they retry, each time on a new connection.
//
// The operator learns which etcd flag to raise from one warning per limit every
// limitWarnInterval; the other refusals are logged at debug.

// limitWarnInterval is how often each limit's warning is repeated while requests exceed it.
const limitWarnInterval = 10 * time.Minute

// etcdLimit is one of etcd's limits on a request.
type etcdLimit struct {
	name string // for the log
	fix  string // what the operator can do about it
	// lastWarn is when the limit was last warned about (unix nanoseconds), 0 never.
	lastWarn atomic.Int64
}

// etcdLimits are the limits one Store warns about.
type etcdLimits struct {
	requestBytes, txnOps, clientSend etcdLimit
}

func newEtcdLimits() *etcdLimits {
	return &etcdLimits{
		requestBytes: etcdLimit{name: "etcd --max-request-bytes",
			fix: "raise etcd's --max-request-bytes (zetcd's embedded etcd takes 10 MiB, etcd's recommended maximum)"},
		txnOps: etcdLimit{name: "etcd --max-txn-ops",
			fix: "raise etcd's --max-txn-ops (a multi takes several etcd operations per op, a session close one per ephemeral node; the embedded etcd allows 65536)"},
		clientSend: etcdLimit{name: "zetcd's etcd client message size (11 MiB)",
			fix: "none: the request makes an etcd request over 11 MiB, more than any etcd takes at its recommended --max-request-bytes of 10 MiB"},
	}
}

// classify returns the limit err reports exceeding, nil if it is not such an error: etcd's
// "request is too large" (over --max-request-bytes) and gRPC's "received message larger than
// max" (over --max-request-bytes plus etcd's 512 KiB of gRPC overhead), "too many operations in
// txn request" (--max-txn-ops), and the client's own "trying to send message larger than max".
func (l *etcdLimits) classify(err error) *etcdLimit {
	if err == nil {
		return nil
	}
	switch desc := rpctypes.ErrorDesc(err); {
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge),
		strings.Contains(desc, "received message larger than max"):
		return &l.requestBytes
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrGRPCTooManyOps):
		return &l.txnOps
	case strings.Contains(desc, "trying to send message larger than max"):
		return &l.clientSend
	}
	return nil
}

// errOverEtcdLimit is the ZooKeeper answer to a request over one of etcd's limits.
const errOverEtcdLimit = encoding.ErrSystemError

// overLimitError is an etcd error that reports a request over one of etcd's limits. It is the
// ZooKeeper error errOverEtcdLimit (errors.As), which the front answers without closing the
// connection, and wraps etcd's error.
type overLimitError struct {
	limit *etcdLimit
	err   error
}

func (e *overLimitError) Error() string {
	return e.err.Error() + " (over " + e.limit.name + ")"
}

func (e *overLimitError) Unwrap() []error { return []error{errOverEtcdLimit, e.err} }

// check turns an error over one of etcd's limits into an overLimitError, warning about it at
// most once per limitWarnInterval per limit; other errors are returned as they are.
func (l *etcdLimits) check(ctx context.Context, log *zap.Logger, err error) error {
	limit := l.classify(err)
	if limit == nil {
		return err
	}
	level := zap.DebugLevel
	now := time.Now().UnixNano()
	if last := limit.lastWarn.Load(); (last == 0 || now-last >= int64(limitWarnInterval)) && limit.lastWarn.CompareAndSwap(last, now) {
		level = zap.WarnLevel
	}
	log.Log(level, "etcd refused a request over its limits; the client is answered SystemError and keeps its session",
		zap.String("op", zetcd.OpLabel(ctx)), zap.String("limit", limit.name), zap.String("fix", limit.fix),
		zap.Duration("repeated-at-most-every", limitWarnInterval), zap.Error(err))
	return &overLimitError{limit: limit, err: err}
}

// limitsKV is the store's KV: every error over one of etcd's limits becomes an overLimitError.
type limitsKV struct {
	clientv3.KV
	limits *etcdLimits
	log    *zap.Logger
}

func (k *limitsKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	r, err := k.KV.Put(ctx, key, val, opts...)
	return r, k.limits.check(ctx, k.log, err)
}

func (k *limitsKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	r, err := k.KV.Get(ctx, key, opts...)
	return r, k.limits.check(ctx, k.log, err)
}

func (k *limitsKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	r, err := k.KV.Delete(ctx, key, opts...)
	return r, k.limits.check(ctx, k.log, err)
}

func (k *limitsKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	r, err := k.KV.Do(ctx, op)
	return r, k.limits.check(ctx, k.log, err)
}

func (k *limitsKV) Txn(ctx context.Context) clientv3.Txn {
	return &limitsTxn{Txn: k.KV.Txn(ctx), ctx: ctx, kv: k}
}

type limitsTxn struct {
	clientv3.Txn
	ctx context.Context
	kv  *limitsKV
}

func (t *limitsTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *limitsTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *limitsTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *limitsTxn) Commit() (*clientv3.TxnResponse, error) {
	r, err := t.Txn.Commit()
	return r, t.kv.limits.check(t.ctx, t.kv.log, err)
}
