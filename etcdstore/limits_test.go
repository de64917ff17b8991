package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
)

// TestEtcdLimitErrors: each way a real etcd refuses a request over its limits (and the client
// refuses to send one over its own) is recognised, becomes the ZooKeeper error SystemError with
// etcd's error still inside, and is warned about once per limit.
func TestEtcdLimitErrors(t *testing.T) {
	const maxBytes, maxOps = 64 << 10, 8
	e, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), MaxRequestBytes: maxBytes, MaxTxnOps: maxOps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	newClient := func(maxSend int) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second,
			MaxCallSendMsgSize: maxSend, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	cli, small := newClient(embedetcd.ClientMaxCallSendMsgSize), newClient(16<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	limits := newEtcdLimits()
	manyPuts := make([]clientv3.Op, maxOps+1)
	for i := range manyPuts {
		manyPuts[i] = clientv3.OpPut(fmt.Sprint("k", i), "v")
	}
	for _, tc := range []struct {
		name string
		call func() error
		want *etcdLimit
	}{
		{"within the limits", func() error { _, err := cli.Put(ctx, "k", "v"); return err }, nil},
		{"over --max-request-bytes", func() error {
			_, err := cli.Put(ctx, "k", strings.Repeat("v", maxBytes+1))
			return err
		}, &limits.requestBytes},
		{"over --max-request-bytes and etcd's gRPC allowance", func() error {
			_, err := cli.Put(ctx, "k", strings.Repeat("v", maxBytes+1<<20))
			return err
		}, &limits.requestBytes},
		{"over --max-txn-ops", func() error { _, err := cli.Txn(ctx).Then(manyPuts...).Commit(); return err }, &limits.txnOps},
		{"over the client's send limit", func() error {
			_, err := small.Put(ctx, "k", strings.Repeat("v", 32<<10))
			return err
		}, &limits.clientSend},
	} {
		err := tc.call()
		t.Logf("%s: %v", tc.name, err)
		if got := limits.classify(err); got != tc.want {
			t.Errorf("%s: %v classified as %v, want %v", tc.name, err, got, tc.want)
			continue
		}
		if tc.want == nil {
			continue
		}
		core, logs := observer.New(zapcore.DebugLevel)
		limits.requestBytes.lastWarn.Store(0)
		limits.txnOps.lastWarn.Store(0)
		limits.clientSend.lastWarn.Store(0)
		for range 3 {
			checked := limits.check(ctx, zap.New(core), err)
			var code encoding.ErrCode
			if !errors.As(checked, &code) || code != encoding.ErrSystemError || !errors.Is(checked, err) {
				t.Errorf("%s: %v is code %v (and etcd's error: %v), want SystemError", tc.name, checked, code, errors.Is(checked, err))
			}
		}
		warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
		if len(warns) != 1 || logs.Len() != 3 || warns[0].ContextMap()["limit"] != tc.want.name {
			t.Errorf("%s: %d warnings of %d entries (%v), want 1 naming %q", tc.name, len(warns), logs.Len(), warns, tc.want.name)
		}
	}
}
