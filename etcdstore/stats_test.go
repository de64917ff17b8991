package etcdstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// TestEtcdStatsSource checks the Store's numbers, kept by the replica.
func TestEtcdStatsSource(t *testing.T) {
	b, kv, _ := newTestBackend(t)
	ctx := context.Background()
	s1 := openTestSession(t, b)
	s2 := openTestSession(t, b)
	if _, _, err := s1.Create(ctx, &encoding.CreateRequest{Path: "/d", Data: []byte("12345"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	const n = 1010
	for i := 0; i < n; i++ {
		owner := s1
		flags := encoding.CreateMode(0)
		if i%50 == 0 {
			owner, flags = s2, encoding.ModeEphemeral
		}
		if _, _, err := owner.Create(ctx, &encoding.CreateRequest{Path: fmt.Sprintf("/d/n%03d", i), Data: []byte("x"), ACL: openACL, Flags: flags}); err != nil {
			t.Fatal(err)
		}
	}
	before := kv.n.Load()
	st, err := b.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rt := kv.n.Load() - before; rt != 0 {
		t.Errorf("Stats took %d round trips, want 0 (the replica)", rt)
	}
	wantNodes := int64(4 + 1 + n + 1)
	if st.NodeCount != wantNodes || st.Sessions != 2 || st.Zxid <= 0 {
		t.Errorf("Stats = %+v, want %d nodes, 2 sessions", st, wantNodes)
	}
	before = kv.n.Load()
	ts, err := b.TreeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rt := kv.n.Load() - before; rt != 0 {
		t.Errorf("TreeStats took %d round trips, want 0 (the replica)", rt)
	}
	if ts.NodeCount != wantNodes {
		t.Errorf("TreeStats nodes %d, want %d", ts.NodeCount, wantNodes)
	}
	eph := ts.Ephemerals[s2.ID()]
	if ts.EphemeralCount != int64(len(eph)) || len(eph) != (n+49)/50 || len(ts.Ephemerals) != 1 || eph[0] != "/d/n000" {
		t.Errorf("ephemerals %v (count %d)", ts.Ephemerals, ts.EphemeralCount)
	}
	// ZooKeeper's formula: every path's length plus its data's; "/zookeeper/config" etc. have
	// empty data.
	wantSize := int64(len("/")+len("/zookeeper")+len("/zookeeper/quota")+len("/zookeeper/config")) +
		int64(len("/d")+5)
	for i := 0; i < n; i++ {
		wantSize += int64(len(fmt.Sprintf("/d/n%03d", i)) + 1)
	}
	if ts.ApproximateDataSize != wantSize {
		t.Errorf("data size %d, want %d", ts.ApproximateDataSize, wantSize)
	}
	// Stats has the same counts, without the paths.
	if st.EphemeralCount != ts.EphemeralCount || st.ApproximateDataSize != wantSize {
		t.Errorf("Stats: %d ephemerals, data size %d; want %d and %d", st.EphemeralCount, st.ApproximateDataSize, ts.EphemeralCount, wantSize)
	}

	if _, _, err := s2.GetData(ctx, &encoding.GetDataRequest{Path: "/d", Watch: true}); err != nil {
		t.Fatal(err)
	}
	ws := b.Watches()
	if len(ws) != 1 || ws[0] != (zetcd.WatchInfo{Session: s2.ID(), Path: "/d", Kind: zetcd.WatchData}) {
		t.Errorf("watches %+v", ws)
	}
}
