package etcdstore

import (
	"context"

	"github.com/zetcd/zetcd/zetcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WrapKV decorates an etcd KV so that every call (Get, Put, Delete, Compact, Do) and every
// committed Txn counts in m as one etcd round trip of the ZooKeeper operation labelled on its
// context (zetcd.WithOpLabel), and every failed one as an etcd error. Give the result to
// Config.KV.
func WrapKV(kv clientv3.KV, m *zetcd.Metrics) clientv3.KV {
	return &metricsKV{KV: kv, m: m}
}

// metricsKV is the KV decorator made by WrapKV. It is as safe for concurrent use as the KV it
// wraps; it holds no state of its own.
type metricsKV struct {
	clientv3.KV
	m *zetcd.Metrics
}

func (k *metricsKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	r, err := k.KV.Put(ctx, key, val, opts...)
	k.m.CountEtcdCall(ctx, err)
	return r, err
}

func (k *metricsKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	r, err := k.KV.Get(ctx, key, opts...)
	k.m.CountEtcdCall(ctx, err)
	return r, err
}

func (k *metricsKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	r, err := k.KV.Delete(ctx, key, opts...)
	k.m.CountEtcdCall(ctx, err)
	return r, err
}

func (k *metricsKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	r, err := k.KV.Compact(ctx, rev, opts...)
	k.m.CountEtcdCall(ctx, err)
	return r, err
}

func (k *metricsKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	r, err := k.KV.Do(ctx, op)
	k.m.CountEtcdCall(ctx, err)
	return r, err
}

func (k *metricsKV) Txn(ctx context.Context) clientv3.Txn {
	return &metricsTxn{Txn: k.KV.Txn(ctx), ctx: ctx, m: k.m}
}

// metricsTxn counts the Txn when it is committed, the one moment it reaches etcd.
type metricsTxn struct {
	clientv3.Txn
	ctx context.Context
	m   *zetcd.Metrics
}

func (t *metricsTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *metricsTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *metricsTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *metricsTxn) Commit() (*clientv3.TxnResponse, error) {
	r, err := t.Txn.Commit()
	t.m.CountEtcdCall(t.ctx, err)
	return r, err
}
