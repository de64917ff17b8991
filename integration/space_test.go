package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testenv"
)

// Issue 14: zetcd's data stays below etcd's space quota. At its limit, writes that grow the
// data are refused with QuotaExceeded while reads, deletes, writes that do not grow it and
// sessions keep working; once data is deleted, writes are accepted again with nothing done by
// hand, and etcd never raises its NOSPACE alarm.

const mib = 1 << 20

// noSpaceAlarm reports whether etcd's NOSPACE alarm is raised.
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

func TestSpaceFillAndRecover(t *testing.T) {
	const quota = 16 * mib
	e := testenv.StartEtcdWith(t, embedetcd.Config{QuotaBackendBytes: quota, Compactor: true})
	cli := e.Client(t)
	// Half the quota: with values of a sixtieth of the quota (a 2 GiB etcd holds 2000 of the
	// largest ZooKeeper values), history and fragmentation weigh more than at the default
	// three quarters of a real quota.
	z := testenv.StartZetcdOn(t, e, testenv.Options{DataLimit: quota / 2, SpacePoll: 100 * time.Millisecond, ManagedEtcd: true})
	if err := e.Etcd.StartCompactor(embedetcd.CompactorConfig{Applied: z.Backend.AppliedRevision, Pressure: z.Backend.NearLimit,
		Policy: embedetcd.Compaction{Interval: 100 * time.Millisecond, MinRetention: 200 * time.Millisecond, PressureInterval: 500 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	if sp := z.Backend.Space(); sp.Quota != quota || sp.Limit != quota/2 || sp.Polled.IsZero() {
		t.Fatalf("space before the fill: %+v, want etcd's quota and the limit", sp)
	}
	start := time.Now()
	c := connectRawTimeout(t, z.Addr, 40000)
	val := []byte(strings.Repeat("v", 256<<10))
	create := func(path string, data []byte) encoding.ErrCode {
		return c.mustCall(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: data, ACL: rawOpenACL}, &encoding.CreateResponse{})
	}
	c.mustCreate("/fill", nil, 0)
	n := 0
	var code encoding.ErrCode
	for ; n < 4*quota/len(val); n++ {
		if code = create(fmt.Sprintf("/fill/n%03d", n), val); code != 0 {
			break
		}
	}
	if code != encoding.ErrQuotaExceeded {
		t.Fatalf("filling: create %d (%d MiB) answered %v, want QuotaExceeded at the limit", n, n*len(val)/mib, code)
	}
	sp := z.Backend.Space()
	t.Logf("full after %d creates of 256 KiB (%v): db size %.1f MiB, in use %.1f MiB, limit %.1f MiB, quota %d MiB",
		n, time.Since(start).Round(time.Millisecond), float64(sp.DBSize)/mib, float64(sp.DBSizeInUse)/mib, float64(sp.Limit)/mib, quota/mib)
	if n*len(val) < quota/4 {
		t.Fatalf("refused after only %d MiB of a %d MiB quota", n*len(val)/mib, quota/mib)
	}

	// At the limit: what grows the data is refused, with QuotaExceeded, as ZooKeeper with
	// zookeeper.enforceQuota answers; checks that come first in ZooKeeper still win. (The
	// room left moves by a fraction of a value as etcd compacts: the refused writes are
	// larger.)
	big := []byte(strings.Repeat("b", 900<<10))
	if code := create("/fill/more", big); code != encoding.ErrQuotaExceeded {
		t.Errorf("create at the limit: %v, want QuotaExceeded", code)
	}
	if code := create("/fill/n000", val); code != encoding.ErrNodeExists {
		t.Errorf("create of an existing node at the limit: %v, want NodeExists (checked before the quota)", code)
	}
	if code := create("/missing/child", val); code != encoding.ErrNoNode {
		t.Errorf("create under a missing parent at the limit: %v, want NoNode", code)
	}
	if hdr, res := c.multi(opSetData("/fill/n000", nil, -1), opCreate("/fill/big", big, 0), opCreate("/fill/empty", nil, 0)); hdr.Err != 0 ||
		len(res) != 3 || res[0].Err != 0 || res[1].Err != encoding.ErrQuotaExceeded || res[2].Err != encoding.ErrRuntimeInconsistency {
		t.Errorf("multi growing the data at the limit: %v %+v, want QuotaExceeded on its create", hdr.Err, res)
	}
	if code := c.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/fill/n001", Data: big, Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrQuotaExceeded {
		t.Errorf("setData growing a node at the limit: %v, want QuotaExceeded", code)
	}
	// ... and everything else works: reads, setData of the same or a smaller size, deletes,
	// sessions.
	var data encoding.GetDataResponse
	if code := c.mustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/fill/n000"}, &data); code != 0 || len(data.Data) != len(val) {
		t.Errorf("getData at the limit: %v, %d bytes", code, len(data.Data))
	}
	var children encoding.GetChildrenResponse
	if code := c.mustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/fill"}, &children); code != 0 || len(children.Children) != n {
		t.Errorf("getChildren at the limit: %v, %d children, want %d", code, len(children.Children), n)
	}
	if st, _ := c.stat("/fill/n000"); st.Version != 0 {
		t.Errorf("/fill/n000 at version %d: the refused multi changed it", st.Version)
	}
	for i := 0; i < 3; i++ {
		if code := c.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/fill/n000", Data: val, Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("setData of the same size at the limit: %v", code)
		}
	}
	if code := c.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/fill/n002", Data: []byte("small"), Version: -1}, &encoding.SetDataResponse{}); code != 0 {
		t.Errorf("setData shrinking a node at the limit: %v", code)
	}
	other := connectRaw(t, z.Addr)
	if code := other.mustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/fill/n000"}, &encoding.ExistsResponse{}); code != 0 {
		t.Errorf("exists on a session opened at the limit: %v", code)
	}
	if code := other.mustCall(encoding.OpCloseSession, nil, nil); code != 0 {
		t.Errorf("closeSession at the limit: %v", code)
	}
	other.close()
	if noSpaceAlarm(t, cli) {
		t.Fatal("etcd raised its NOSPACE alarm: zetcd's limit did not keep it below the quota")
	}

	// Deleting data frees room: once etcd has compacted the deleted versions, writes are
	// accepted again, with nothing done by hand.
	for i := 0; i < n; i += 2 {
		if code := c.mustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: fmt.Sprintf("/fill/n%03d", i), Version: -1}, nil); code != 0 {
			t.Fatalf("delete at the limit: %v", code)
		}
	}
	// Half the data deleted: the large node refused above, and as many 256 KiB ones as make
	// up half of what was deleted, are accepted (each as soon as there is room).
	deleted := time.Now()
	for i := -1; i < n/4; i++ {
		path, data := fmt.Sprintf("/fill/again%03d", i), val
		if i < 0 {
			path, data = "/fill/more", big
		}
		for {
			code := create(path, data)
			if code == 0 {
				break
			}
			if code != encoding.ErrQuotaExceeded || time.Since(deleted) > 20*time.Second {
				t.Fatalf("create %s %v after deleting half the data: %v", path, time.Since(deleted).Round(time.Millisecond), code)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sp = z.Backend.Space()
	t.Logf("writes accepted again %v after the deletes: db size %.1f MiB, in use %.1f MiB; whole test %v",
		time.Since(deleted).Round(time.Millisecond), float64(sp.DBSize)/mib, float64(sp.DBSizeInUse)/mib, time.Since(start).Round(time.Millisecond))
	if noSpaceAlarm(t, cli) {
		t.Error("etcd raised its NOSPACE alarm")
	}
}
