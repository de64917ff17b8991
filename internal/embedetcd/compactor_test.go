package embedetcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

const mib = 1 << 20

// startSmall starts an embedded etcd with a quota of quota bytes and zetcd's compactor.
func startSmall(t *testing.T, quota int64, policy Compaction) (*Etcd, *clientv3.Client) {
	t.Helper()
	e, err := Start(Config{Dir: t.TempDir(), QuotaBackendBytes: quota, Compactor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if err := e.StartCompactor(CompactorConfig{Policy: policy, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))}); err != nil {
		t.Fatal(err)
	}
	if err := e.StartCompactor(CompactorConfig{}); err == nil {
		t.Error("a second compactor started")
	}
	return e, cli
}

func noSpaceAlarm(t *testing.T, cli *clientv3.Client) bool {
	t.Helper()
	r, err := cli.AlarmList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

// TestCompactorKeepsOverwritesUnderQuota is a load of overwrites on a small quota: one key
// overwritten with large values, twice the quota written in all. History compacted by
// size keeps etcd from ever raising its NOSPACE alarm.
func TestCompactorKeepsOverwritesUnderQuota(t *testing.T) {
	const quota = 16 * mib
	e, cli := startSmall(t, quota, Compaction{Interval: 100 * time.Millisecond, MinRetention: 200 * time.Millisecond})
	val := strings.Repeat("x", 256<<10)
	ctx := context.Background()
	start := time.Now()
	var maxSize int64
	for i := 0; i < 2*quota/len(val); i++ {
		if _, err := cli.Put(ctx, "/big", val); err != nil {
			t.Fatalf("put %d (%d MiB written): %v", i, i*len(val)/mib, err)
		}
		if i%4 == 0 {
			st, err := cli.Status(ctx, e.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			maxSize = max(maxSize, st.DbSize)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if noSpaceAlarm(t, cli) {
		t.Fatal("NOSPACE alarm raised")
	}
	t.Logf("%d MiB written in %v; largest db size seen %.1f MiB of a %d MiB quota",
		2*quota/mib, time.Since(start).Round(time.Millisecond), float64(maxSize)/mib, quota/mib)
}

// TestCompactorRecoversFromNoSpace: with only the alarm rule left (the others set out of
// reach), overwrites fill the quota until etcd raises NOSPACE and refuses writes; the compactor
// then compacts, defragments and disarms, and writes succeed again with nothing done by hand.
func TestCompactorRecoversFromNoSpace(t *testing.T) {
	const quota = 8 * mib
	const never = 1 << 50
	_, cli := startSmall(t, quota, Compaction{Interval: 100 * time.Millisecond, MaxRevisions: never,
		MaxHistoryBytes: never, PressureBytes: never, DefragMinBytes: never})
	val := strings.Repeat("x", 256<<10)
	ctx := context.Background()
	var err error
	for i := 0; i < 4*quota/len(val) && err == nil; i++ {
		_, err = cli.Put(ctx, "/big", val)
	}
	if !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("writing 4x the quota: %v, want etcd's NOSPACE", err)
	}
	refused := time.Now()
	deadline := refused.Add(20 * time.Second)
	for {
		if _, err = cli.Put(ctx, "/big", "small"); err == nil {
			break
		}
		if !errors.Is(err, rpctypes.ErrNoSpace) || time.Now().After(deadline) {
			t.Fatalf("put %v after NOSPACE: %v", time.Since(refused).Round(time.Millisecond), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes accepted again %v after NOSPACE", time.Since(refused).Round(time.Millisecond))
	if noSpaceAlarm(t, cli) {
		t.Error("NOSPACE alarm still raised")
	}
}

// TestRecoverSpaceAtRestart: an etcd stopped with its NOSPACE alarm raised starts with it
// still raised (etcd keeps alarms in its database) and refuses writes, zetcd's own at start
// included; RecoverSpace, run before them, compacts, defragments and disarms it.
func TestRecoverSpaceAtRestart(t *testing.T) {
	const quota = 8 * mib
	dir := t.TempDir()
	e, err := Start(Config{Dir: dir, QuotaBackendBytes: quota, Compactor: true})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	val := strings.Repeat("x", 256<<10)
	for i := 0; i < 4*quota/len(val) && err == nil; i++ {
		_, err = cli.Put(ctx, "/big", val)
	}
	if !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("writing 4x the quota: %v, want etcd's NOSPACE", err)
	}
	cli.Close()
	e.Close()

	if e, err = Start(Config{Dir: dir, QuotaBackendBytes: quota, Compactor: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if cli, err = e.Client(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if _, err := cli.Put(ctx, "/big", "small"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("put after the restart: %v, want NOSPACE (the alarm kept)", err)
	}
	if err := e.RecoverSpace(ctx, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/big", "small"); err != nil {
		t.Errorf("put after RecoverSpace: %v", err)
	}
	if noSpaceAlarm(t, cli) {
		t.Error("NOSPACE alarm still raised")
	}
	if err := e.RecoverSpace(ctx, zaptest.NewLogger(t)); err != nil {
		t.Errorf("RecoverSpace with no alarm: %v", err)
	}
}
