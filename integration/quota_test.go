package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// ZooKeeper's quotas (DataTree, ZooKeeperServer.checkQuota), through raw requests as zkCli's
// setquota sends them: one script on every server, with and without quota enforcement
// (zetcd's EnforceQuota, ZooKeeper's zookeeper.enforceQuota), whose every reply code and every
// look at the limits and stats nodes must read the same (quotaWant). The zkCli commands
// themselves are compared in integration/clients.

const (
	quotaLimits = "/zookeeper/quota/q/zookeeper_limits"
	quotaStats  = "/zookeeper/quota/q/zookeeper_stats"
)

// quotaScript runs the script on addr and returns its transcript.
func quotaScript(t *testing.T, addr string) []string {
	c := itest.ConnectRaw(t, addr)
	var out []string
	var last encoding.Zxid
	call := func(what string, op encoding.Op, req, resp encoding.Record) {
		t.Helper()
		hdr, err := c.Call(op, req, resp)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// Every write consumes one zxid, the refused ones too.
		out = append(out, fmt.Sprintf("%s: %d, next zxid %v", what, hdr.Err, last == 0 || zxidAfter(last, hdr.Zxid, 1)))
		last = hdr.Zxid
	}
	create := func(path, data string) {
		t.Helper()
		var d []byte
		if data != "" {
			d = []byte(data)
		}
		call("create "+path, encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: d, ACL: itest.RawOpenACL}, &encoding.CreateResponse{})
	}
	setData := func(path, data string, version int32) {
		t.Helper()
		call(fmt.Sprintf("setData %s %q v%d", path, data, version), encoding.OpSetData,
			&encoding.SetDataRequest{Path: path, Data: []byte(data), Version: version}, &encoding.SetDataResponse{})
	}
	deleteNode := func(path string) {
		t.Helper()
		call("delete "+path, encoding.OpDelete, &encoding.DeleteRequest{Path: path, Version: -1}, nil)
	}
	multi := func(what string, ops ...encoding.MultiOp) {
		t.Helper()
		var resp encoding.MultiResponse
		call("multi "+what, encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, &resp)
		var codes []string
		for _, r := range resp.Results {
			codes = append(codes, fmt.Sprint(int32(r.Err)))
		}
		out = append(out, "  results "+strings.Join(codes, " "))
	}
	look := func(path string) {
		t.Helper()
		st, data := c.Stat(path)
		out = append(out, fmt.Sprintf("  %s %q version=%d dataLength=%d mzxid=czxid:%v", path, data, st.Version, st.DataLength, st.Mzxid == st.Czxid))
	}

	create("/q", "ab")
	create("/q/a", "x")
	// zkCli's setquota: the quota path's nodes, the limits, then the stats.
	create("/zookeeper/quota/q", "")
	create(quotaLimits, "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=4")
	create(quotaStats, "count=0,bytes=0")
	look(quotaStats)
	if code := c.Watch("getData", quotaStats); code != 0 {
		t.Fatalf("watch: %v", code)
	}

	create("/q/b", "yy")
	setData("/q/a", "xyz", -1)
	look(quotaStats)
	// Both creates are checked against the tree before the multi: count 3, then 4 each.
	multi("create /q/c, /q/d", opCreate("/q/c", nil, 0), opCreate("/q/d", []byte("d"), 0))
	look(quotaStats)
	create("/q/e", "")
	look(quotaStats)
	create("/q/a", "0123456789") // NodeExists comes before the quota
	setData(quotaLimits, "count=-1,bytes=-1=;byteHardLimit=12;countHardLimit=10", -1)
	setData("/q/a", "0123456789", 99) // the quota comes before the version
	setData("/q/a", "0123456789", -1)
	look(quotaStats)
	multi("setData /q/a, create /q/f", opSetData("/q/a", []byte("0123"), -1), opCreate("/q/f", []byte("0123456789"), 0))
	look(quotaStats)
	deleteNode("/q/b")
	look(quotaStats)
	// The quota'd path's data counts too.
	setData("/q", "", -1)
	look(quotaStats)

	// Nested: a write counts in the deepest quota only; a stats node created counts its
	// subtree (DataTree.getCounts).
	create("/q/in", "i")
	create("/zookeeper/quota/q/in", "")
	create("/zookeeper/quota/q/in/zookeeper_limits", "count=-1,bytes=-1=;countHardLimit=1")
	create("/zookeeper/quota/q/in/zookeeper_stats", "count=0,bytes=0")
	look("/zookeeper/quota/q/in/zookeeper_stats")
	create("/q/in/x", "x")
	look("/zookeeper/quota/q/in/zookeeper_stats")
	look(quotaStats)

	// An ended session's ephemerals leave the statistics.
	e := itest.ConnectRaw(t, addr)
	if code := e.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/q/eph", Data: []byte("ee"), ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, &encoding.CreateResponse{}); code != 0 {
		t.Fatalf("create ephemeral: %v", code)
	}
	c.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{})
	look(quotaStats)
	if code := e.MustCall(encoding.OpCloseSession, nil, nil); code != 0 {
		t.Fatalf("closeSession: %v", code)
	}
	c.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{})
	look(quotaStats)
	last = 0 // the other session's writes took zxids

	// A create2 of a stats node answers the Stat before its statistics replace the data.
	create("/zookeeper/quota/r", "")
	var r2 encoding.Create2Response
	call("create2 r stats", encoding.OpCreate2, &encoding.CreateRequest{Path: "/zookeeper/quota/r/zookeeper_stats", Data: []byte("x"), ACL: itest.RawOpenACL}, &r2)
	out = append(out, fmt.Sprintf("  create2 dataLength=%d", r2.Stat.DataLength))
	look("/zookeeper/quota/r/zookeeper_stats")

	// A client's setData of the stats node moves its version; counting goes on from its data.
	setData(quotaStats, "count=0,bytes=0", -1)
	create("/q/g", "")
	look(quotaStats)
	// Without its limits node the path is no longer counted.
	deleteNode(quotaLimits)
	create("/q/h", "hh")
	look(quotaStats)

	c.Barrier()
	// The getData watch on the stats node fires only for the client's setData of it.
	out = append(out, fmt.Sprintf("stats node events: %d", len(c.TakeEvents())))
	return out
}

// quotaWant is the transcript of quotaScript with enforcement (enforced) or without: taken on
// ZooKeeper 3.9.6.
func quotaWant(enforced bool) []string {
	pick := func(on, off string) string {
		if enforced {
			return on
		}
		return off
	}
	return []string{
		"create /q: 0, next zxid true",
		"create /q/a: 0, next zxid true",
		"create /zookeeper/quota/q: 0, next zxid true",
		"create /zookeeper/quota/q/zookeeper_limits: 0, next zxid true",
		"create /zookeeper/quota/q/zookeeper_stats: 0, next zxid true",
		`  /zookeeper/quota/q/zookeeper_stats "count=2,bytes=3" version=0 dataLength=15 mzxid=czxid:true`,
		"create /q/b: 0, next zxid true",
		`setData /q/a "xyz" v-1: 0, next zxid true`,
		`  /zookeeper/quota/q/zookeeper_stats "count=3,bytes=7" version=0 dataLength=15 mzxid=czxid:true`,
		"multi create /q/c, /q/d: 0, next zxid true",
		"  results 0 0",
		`  /zookeeper/quota/q/zookeeper_stats "count=5,bytes=8" version=0 dataLength=15 mzxid=czxid:true`,
		pick("create /q/e: -125, next zxid true", "create /q/e: 0, next zxid true"),
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=5,bytes=8" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=6,bytes=8" version=0 dataLength=15 mzxid=czxid:true`),
		"create /q/a: -110, next zxid true",
		`setData /zookeeper/quota/q/zookeeper_limits "count=-1,bytes=-1=;byteHardLimit=12;countHardLimit=10" v-1: 0, next zxid true`,
		pick(`setData /q/a "0123456789" v99: -125, next zxid true`, `setData /q/a "0123456789" v99: -103, next zxid true`),
		pick(`setData /q/a "0123456789" v-1: -125, next zxid true`, `setData /q/a "0123456789" v-1: 0, next zxid true`),
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=5,bytes=8" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=6,bytes=15" version=0 dataLength=16 mzxid=czxid:true`),
		pick("multi setData /q/a, create /q/f: 0, next zxid true", "multi setData /q/a, create /q/f: 0, next zxid true"),
		pick("  results 0 -125", "  results 0 0"),
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=5,bytes=8" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=7,bytes=19" version=0 dataLength=16 mzxid=czxid:true`),
		"delete /q/b: 0, next zxid true",
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=4,bytes=6" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=6,bytes=17" version=0 dataLength=16 mzxid=czxid:true`),
		`setData /q "" v-1: 0, next zxid true`,
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=4,bytes=4" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=6,bytes=15" version=0 dataLength=16 mzxid=czxid:true`),
		"create /q/in: 0, next zxid true",
		"create /zookeeper/quota/q/in: 0, next zxid true",
		"create /zookeeper/quota/q/in/zookeeper_limits: 0, next zxid true",
		"create /zookeeper/quota/q/in/zookeeper_stats: 0, next zxid true",
		`  /zookeeper/quota/q/in/zookeeper_stats "count=1,bytes=1" version=0 dataLength=15 mzxid=czxid:true`,
		pick("create /q/in/x: -125, next zxid true", "create /q/in/x: 0, next zxid true"),
		pick(`  /zookeeper/quota/q/in/zookeeper_stats "count=1,bytes=1" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/in/zookeeper_stats "count=2,bytes=2" version=0 dataLength=15 mzxid=czxid:true`),
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=5,bytes=5" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=7,bytes=16" version=0 dataLength=16 mzxid=czxid:true`),
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=6,bytes=7" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=8,bytes=18" version=0 dataLength=16 mzxid=czxid:true`),
		pick(`  /zookeeper/quota/q/zookeeper_stats "count=5,bytes=5" version=0 dataLength=15 mzxid=czxid:true`,
			`  /zookeeper/quota/q/zookeeper_stats "count=7,bytes=16" version=0 dataLength=16 mzxid=czxid:true`),
		"create /zookeeper/quota/r: 0, next zxid true",
		"create2 r stats: 0, next zxid true",
		"  create2 dataLength=1",
		`  /zookeeper/quota/r/zookeeper_stats "count=0,bytes=0" version=0 dataLength=15 mzxid=czxid:true`,
		`setData /zookeeper/quota/q/zookeeper_stats "count=0,bytes=0" v-1: 0, next zxid true`,
		"create /q/g: 0, next zxid true",
		`  /zookeeper/quota/q/zookeeper_stats "count=1,bytes=0" version=1 dataLength=15 mzxid=czxid:false`,
		"delete /zookeeper/quota/q/zookeeper_limits: 0, next zxid true",
		"create /q/h: 0, next zxid true",
		`  /zookeeper/quota/q/zookeeper_stats "count=1,bytes=0" version=1 dataLength=15 mzxid=czxid:false`,
		"stats node events: 1", // the client's setData, not the statistics
	}
}

func TestQuotaDifferential(t *testing.T) {
	for _, enforced := range []bool{false, true} {
		t.Run(fmt.Sprintf("enforced=%v", enforced), func(t *testing.T) {
			testenv.ForEachServerWith(t, testenv.ServerOptions{EnforceQuota: enforced}, func(t *testing.T, addr string) {
				got, want := quotaScript(t, addr), quotaWant(enforced)
				if !slices.Equal(got, want) {
					t.Errorf("transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		})
	}
}
