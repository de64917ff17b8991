package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// zetcd's data stays below etcd's space quota. At its limit, writes that grow the
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
	c := itest.ConnectRawTimeout(t, z.Addr, 40000)
	val := []byte(strings.Repeat("v", 256<<10))
	create := func(path string, data []byte) encoding.ErrCode {
		return c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: data, ACL: itest.RawOpenACL}, &encoding.CreateResponse{})
	}
	c.MustCreate("/fill", nil, 0)
	// fill creates nodes of data under /fill, named prefix000, prefix001, ..., until creates
	// are refused three times in a row, a few polls apart (zetcd counts what it writes
	// between polls generously, so the first refusal can come a little early); it returns how
	// many it created.
	fill := func(prefix string, data []byte) int {
		t.Helper()
		n, refusals := 0, 0
		for n < 4*quota/len(data) && refusals < 3 {
			switch code := create(fmt.Sprintf("/fill/%s%03d", prefix, n), data); code {
			case 0:
				n, refusals = n+1, 0
			case encoding.ErrQuotaExceeded:
				refusals++
				time.Sleep(300 * time.Millisecond)
			default:
				t.Fatalf("filling: create %s%03d (%d KiB each) answered %v", prefix, n, len(data)>>10, code)
			}
		}
		if refusals < 3 {
			t.Fatalf("filling: %d creates of %d KiB accepted, no QuotaExceeded", n, len(data)>>10)
		}
		return n
	}
	n := fill("n", val)
	// Topped off with small nodes: the room left is then under one of them. etcd's database in
	// use moves by a few of the large values on its own (bbolt rewrites a leaf, values
	// included, when a key in it changes, and frees the old pages only when no reader holds
	// them), which would leave room for the writes below that must not fit.
	small := fill("s", []byte(strings.Repeat("s", 16<<10)))
	sp := z.Backend.Space()
	t.Logf("full after %d creates of 256 KiB and %d of 16 KiB (%v): db size %.1f MiB, in use %.1f MiB, limit %.1f MiB, quota %d MiB",
		n, small, time.Since(start).Round(time.Millisecond), float64(sp.DBSize)/mib, float64(sp.DBSizeInUse)/mib, float64(sp.Limit)/mib, quota/mib)
	if n*len(val) < quota/4 {
		t.Fatalf("refused after only %d MiB of a %d MiB quota", n*len(val)/mib, quota/mib)
	}

	// At the limit: what grows the data is refused, with QuotaExceeded, as ZooKeeper with
	// zookeeper.enforceQuota answers; checks that come first in ZooKeeper still win. The
	// refused writes grow the data by more than twice a large value, more than bbolt's own
	// movement of the database in use.
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
	if hdr, res := c.Multi(opSetData("/fill/n000", nil, -1), opCreate("/fill/big", big, 0), opCreate("/fill/empty", nil, 0)); hdr.Err != 0 ||
		len(res) != 3 || res[0].Err != 0 || res[1].Err != encoding.ErrQuotaExceeded || res[2].Err != encoding.ErrRuntimeInconsistency {
		t.Errorf("multi growing the data at the limit: %v %+v, want QuotaExceeded on its create", hdr.Err, res)
	}
	if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/fill/n001", Data: big, Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrQuotaExceeded {
		t.Errorf("setData growing a node at the limit: %v, want QuotaExceeded", code)
	}
	// ... and everything else works: reads, setData of the same or a smaller size, deletes,
	// sessions.
	var data encoding.GetDataResponse
	if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/fill/n000"}, &data); code != 0 || len(data.Data) != len(val) {
		t.Errorf("getData at the limit: %v, %d bytes", code, len(data.Data))
	}
	var children encoding.GetChildrenResponse
	if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/fill"}, &children); code != 0 || len(children.Children) != n+small {
		t.Errorf("getChildren at the limit: %v, %d children, want %d", code, len(children.Children), n+small)
	}
	if st, _ := c.Stat("/fill/n000"); st.Version != 0 {
		t.Errorf("/fill/n000 at version %d: the refused multi changed it", st.Version)
	}
	for i := 0; i < 3; i++ {
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/fill/n000", Data: val, Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("setData of the same size at the limit: %v", code)
		}
	}
	if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/fill/n002", Data: []byte("small"), Version: -1}, &encoding.SetDataResponse{}); code != 0 {
		t.Errorf("setData shrinking a node at the limit: %v", code)
	}
	other := itest.ConnectRaw(t, z.Addr)
	if code := other.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/fill/n000"}, &encoding.ExistsResponse{}); code != 0 {
		t.Errorf("exists on a session opened at the limit: %v", code)
	}
	if code := other.MustCall(encoding.OpCloseSession, nil, nil); code != 0 {
		t.Errorf("closeSession at the limit: %v", code)
	}
	other.Close()
	if noSpaceAlarm(t, cli) {
		t.Fatal("etcd raised its NOSPACE alarm: zetcd's limit did not keep it below the quota")
	}

	// Deleting data frees room: once etcd has compacted the deleted versions, writes are
	// accepted again, with nothing done by hand.
	for i := 0; i < n; i += 2 {
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: fmt.Sprintf("/fill/n%03d", i), Version: -1}, nil); code != 0 {
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
		testenv.Eventually(t, 20*time.Second, fmt.Sprintf("create %s after deleting half the data", path), func() error {
			return refusedForSpace(t, create(path, data))
		})
	}
	sp = z.Backend.Space()
	t.Logf("writes accepted again %v after the deletes: db size %.1f MiB, in use %.1f MiB; whole test %v",
		time.Since(deleted).Round(time.Millisecond), float64(sp.DBSize)/mib, float64(sp.DBSizeInUse)/mib, time.Since(start).Round(time.Millisecond))
	if noSpaceAlarm(t, cli) {
		t.Error("etcd raised its NOSPACE alarm")
	}
}

// refusedForSpace is a condition for testenv.Eventually on a write's answer: nil when it
// succeeded, an error while it is refused for space (QuotaExceeded); any other answer fails the
// test.
func refusedForSpace(t *testing.T, code encoding.ErrCode) error {
	t.Helper()
	switch code {
	case 0:
		return nil
	case encoding.ErrQuotaExceeded:
		return fmt.Errorf("answered %v", code)
	}
	t.Fatalf("answered %v, want success or QuotaExceeded", code)
	return nil
}

// httpGet returns the status code and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestProcessExternalNoSpace: zetcd in front of an external etcd (here a separate embedded etcd
// with a small quota, which zetcd does not manage) that fills up by writes outside zetcd's
// prefix until etcd raises its NOSPACE alarm. zetcd shows it in /healthz, in
// zetcd_etcd_nospace_alarm and in one log line naming the etcdctl commands, answers writes with
// QuotaExceeded and keeps serving reads; once the operator has run those commands, it serves
// writes again by itself.
func TestProcessExternalNoSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	const quota = 8 * mib
	e := testenv.StartEtcdWith(t, embedetcd.Config{QuotaBackendBytes: quota})
	cli := e.Client(t)
	maddr := itest.FreePort(t)
	p := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", e.Etcd.Endpoint, "--metrics-addr", maddr)
	base := "http://" + maddr
	c := itest.ConnectRawTimeout(t, p.Addr, 40000)
	c.MustCreate("/a", []byte("data"), 0)
	if code, body := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz before: %d %q", code, body)
	}

	// Someone else's writes fill etcd until it raises NOSPACE.
	ctx := context.Background()
	val := strings.Repeat("x", 256<<10)
	var err error
	for i := 0; i < 4*quota/len(val) && err == nil; i++ {
		_, err = cli.Put(ctx, "/not-zetcd/big", val)
	}
	if !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("filling etcd: %v, want NOSPACE", err)
	}
	raised := time.Now()
	testenv.Eventually(t, 15*time.Second, "/healthz reporting the alarm", func() error {
		if code, body := httpGet(t, base+"/healthz"); code != 503 || !strings.Contains(body, "NOSPACE") {
			return fmt.Errorf("%d %q", code, body)
		}
		return nil
	})
	t.Logf("/healthz reports the alarm %v after it was raised", time.Since(raised).Round(time.Millisecond))
	if code, body := httpGet(t, base+"/healthz?exclude=NOSPACE"); code != 200 {
		t.Errorf("/healthz?exclude=NOSPACE: %d %q", code, body)
	}
	if m := itest.Scrape(t, base+"/metrics"); m["zetcd_etcd_nospace_alarm"] != 1 || m["zetcd_etcd_quota_bytes"] != quota ||
		m["zetcd_etcd_db_size_bytes"] < quota*3/4 || m["zetcd_data_limit_bytes"] != quota/4*3 {
		t.Errorf("space gauges with the alarm: alarm %v, quota %v, db size %v, limit %v", m["zetcd_etcd_nospace_alarm"],
			m["zetcd_etcd_quota_bytes"], m["zetcd_etcd_db_size_bytes"], m["zetcd_data_limit_bytes"])
	}
	// Reads are served; writes are answered QuotaExceeded, and the connection stays open.
	var data encoding.GetDataResponse
	if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/a"}, &data); code != 0 || string(data.Data) != "data" {
		t.Errorf("getData with the alarm: %v %q", code, data.Data)
	}
	for _, path := range []string{"/b", "/c"} {
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: []byte("d"), ACL: itest.RawOpenACL}, &encoding.CreateResponse{}); code != encoding.ErrQuotaExceeded {
			t.Errorf("create %s with the alarm: %v, want QuotaExceeded", path, code)
		}
	}
	if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/a", Data: []byte("da"), Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrQuotaExceeded {
		t.Errorf("setData with the alarm: %v, want QuotaExceeded", code)
	}
	time.Sleep(2500 * time.Millisecond) // a few more polls: still one log line
	if n := strings.Count(p.LogText(), "etcdctl alarm disarm"); n != 1 {
		t.Errorf("%d log lines name the etcdctl commands, want 1:\n%s", n, p.LogText())
	}

	// The operator's commands, as the log names them.
	st, err := cli.Status(ctx, e.Etcd.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Defragment(ctx, e.Etcd.Endpoint); err != nil {
		t.Fatal(err)
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms.Alarms {
		if _, err := cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 15*time.Second, "create after the operator's commands", func() error {
		return refusedForSpace(t, c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/b", Data: []byte("d"), ACL: itest.RawOpenACL}, &encoding.CreateResponse{}))
	})
	if code, body := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz after the operator's commands: %d %q", code, body)
	}
	if m := itest.Scrape(t, base+"/metrics"); m["zetcd_etcd_nospace_alarm"] != 0 {
		t.Errorf("zetcd_etcd_nospace_alarm %v after the disarm", m["zetcd_etcd_nospace_alarm"])
	}
}
