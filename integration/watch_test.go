package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// Watch tests use the raw client so they see exactly which notifications arrive and where they
// fall between replies. A "no event" check is a later request's reply: an event that was due
// would have been written before it (FinalRequestProcessor).

func eventsString(evs []itest.RawEvent) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, e.String())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func wantEvents(t *testing.T, what string, got []itest.RawEvent, want ...string) {
	t.Helper()
	if g, w := eventsString(got), "["+strings.Join(want, ", ")+"]"; g != w {
		t.Errorf("%s: events %s, want %s", what, g, w)
	}
}

// TestWatchTriggers: every event each write triggers (DataTree, WatcherType), one-shot semantics, one event per
// connection per trigger, and the notification zxid (3.9: the zxid of the write that fired it).
func TestWatchTriggers(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		w := itest.ConnectRaw(t, addr) // holds the watches
		x := itest.ConnectRaw(t, addr) // makes the changes
		x.Create("/q", nil, 0)

		// create P: exist watch on P gets NodeCreated; child watch on Q gets NodeChildrenChanged.
		if code := w.Watch("exists", "/q/p"); code != encoding.ErrNoNode {
			t.Fatalf("exists on a missing node: %v", code)
		}
		w.Watch("getChildren", "/q")
		z := x.Create("/q/p", []byte("1"), 0)
		evs := w.WaitEvents(2)
		wantEvents(t, "create", evs, "NodeCreated /q/p", "NodeChildrenChanged /q")
		for _, e := range evs {
			if e.Zxid != z {
				t.Errorf("%v: notification zxid %v, want the create's zxid %v", e, e.Zxid, z)
			}
			if e.State != encoding.StateSyncConnected {
				t.Errorf("%v: state %v", e, e.State)
			}
		}

		// setData P: data watches (getData and exists on a present node) fire once.
		w.Watch("getData", "/q/p")
		w.Watch("exists", "/q/p")
		w.Watch("getChildren2", "/q")
		x.SetData("/q/p", []byte("2"))
		wantEvents(t, "setData", w.WaitEvents(1), "NodeDataChanged /q/p")
		// One-shot: a second change fires nothing.
		x.SetData("/q/p", []byte("3"))
		w.Barrier()
		wantEvents(t, "second setData", w.TakeEvents())

		// setACL fires nothing.
		w.Watch("getData", "/q/p")
		x.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: "/q/p", ACL: itest.RawOpenACL, Version: -1}, &encoding.SetACLResponse{})
		w.Barrier()
		wantEvents(t, "setACL", w.TakeEvents())

		// delete P: data and child watches on P get one NodeDeleted; child watch on Q gets
		// NodeChildrenChanged (the getChildren2 watch set above is still armed).
		w.Watch("getChildren", "/q/p")
		x.Delete("/q/p")
		wantEvents(t, "delete", w.WaitEvents(2), "NodeDeleted /q/p", "NodeChildrenChanged /q")

		// Root's children: the event path is "/".
		w.Watch("getChildren", "/")
		x.Create("/top", nil, 0)
		wantEvents(t, "create under root", w.WaitEvents(1), "NodeChildrenChanged /")

		// getData/getChildren on a missing node set no watch.
		if code := w.Watch("getData", "/none"); code != encoding.ErrNoNode {
			t.Fatal(code)
		}
		if code := w.Watch("getChildren", "/none"); code != encoding.ErrNoNode {
			t.Fatal(code)
		}
		x.Create("/none", nil, 0)
		w.Barrier()
		wantEvents(t, "create after failed reads", w.TakeEvents())
	})
}

// TestWatchOrdering: an event reaches its client before any reply that reflects the change —
// the client's own write, reads pipelined behind it, and reads after another session's write.
func TestWatchOrdering(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		a := itest.ConnectRaw(t, addr)
		b := itest.ConnectRaw(t, addr)
		a.Create("/o", []byte("0"), 0)

		// The writer's own watch: the event comes before the setData reply and the pipelined
		// getData after it.
		a.Watch("getData", "/o")
		xs := a.Send(encoding.OpSetData, &encoding.SetDataRequest{Path: "/o", Data: []byte("1"), Version: -1})
		xg := a.Send(encoding.OpGetData, &encoding.GetDataRequest{Path: "/o"})
		var order []string
		for len(order) < 3 {
			hdr, _, err := a.ReadReply()
			if err != nil {
				t.Fatal(err)
			}
			switch hdr.Xid {
			case encoding.XidNotification:
				order = append(order, "event")
			case xs:
				order = append(order, "setData")
			case xg:
				order = append(order, "getData")
			}
		}
		if !slices.Equal(order, []string{"event", "setData", "getData"}) {
			t.Errorf("frame order %v, want [event setData getData]", order)
		}

		// Another session's write: once b's write is acknowledged, a's next reply comes after
		// the event. Repeat to catch races.
		for i := 0; i < 20; i++ {
			a.Watch("getData", "/o")
			b.SetData("/o", []byte(fmt.Sprint(i)))
			var gd encoding.GetDataResponse
			a.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/o"}, &gd)
			if string(gd.Data) != fmt.Sprint(i) {
				t.Fatalf("round %d: read %q after b's write", i, gd.Data)
			}
			wantEvents(t, fmt.Sprintf("round %d", i), a.TakeEvents(), "NodeDataChanged /o")
		}

		// Events come in zxid order.
		a.Watch("getChildren", "/o")
		a.Watch("getData", "/o")
		b.Create("/o/c", nil, 0)
		b.SetData("/o", []byte("x"))
		evs := a.WaitEvents(2)
		wantEvents(t, "two changes", evs, "NodeChildrenChanged /o", "NodeDataChanged /o")
		if len(evs) == 2 && evs[0].Zxid >= evs[1].Zxid {
			t.Errorf("events out of zxid order: %v then %v", evs[0].Zxid, evs[1].Zxid)
		}
	})
}

// TestWatchSetWatches: after a reconnect, setWatches fires what was missed since relativeZxid
// (zxid -1) and re-arms the rest (DataTree.setWatches).
func TestWatchSetWatches(t *testing.T) {
	for _, op := range []encoding.Op{encoding.OpSetWatches, encoding.OpSetWatches2} {
		t.Run(op.String(), func(t *testing.T) {
			forEachServer(t, func(t *testing.T, addr string) {
				x := itest.ConnectRaw(t, addr)
				for _, p := range []string{"/changed", "/deleted", "/same", "/parent", "/parent/a", "/quiet"} {
					x.Create(p, nil, 0)
				}
				rel := x.Create("/parent/b", nil, 0)
				x.SetData("/changed", []byte("new"))
				x.Delete("/deleted")
				x.Delete("/parent/a")
				x.Create("/appeared", nil, 0)

				c := itest.ConnectRaw(t, addr)
				data := []string{"/changed", "/deleted", "/same"}
				exist := []string{"/appeared", "/absent"}
				child := []string{"/parent", "/quiet", "/gone"}
				var req encoding.Record = &encoding.SetWatches{RelativeZxid: rel, DataWatches: data, ExistWatches: exist, ChildWatches: child}
				if op == encoding.OpSetWatches2 {
					req = &encoding.SetWatches2{RelativeZxid: rel, DataWatches: data, ExistWatches: exist, ChildWatches: child,
						PersistentWatches: []string{}, PersistentRecursiveWatches: []string{}}
				}
				if code := c.MustCall(op, req, nil); code != 0 {
					t.Fatalf("%v: %v", op, code)
				}
				got := c.TakeEvents()
				for _, e := range got {
					if e.Zxid != -1 {
						t.Errorf("%v: catch-up event zxid %v, want -1", e, e.Zxid)
					}
				}
				var lines []string
				for _, e := range got {
					lines = append(lines, e.String())
				}
				slices.Sort(lines)
				want := []string{"NodeChildrenChanged /parent", "NodeCreated /appeared", "NodeDataChanged /changed", "NodeDeleted /deleted", "NodeDeleted /gone"}
				if !slices.Equal(lines, want) {
					t.Errorf("catch-up events %v, want %v", lines, want)
				}
				// The rest were re-armed.
				x.SetData("/same", []byte("now"))
				x.Create("/absent", nil, 0)
				x.Create("/quiet/kid", nil, 0)
				evs := c.WaitEvents(3)
				wantEvents(t, "re-armed", evs, "NodeDataChanged /same", "NodeCreated /absent", "NodeChildrenChanged /quiet")
			})
		})
	}
}

// TestWatchSetWatchesNullList: a null watch list in setWatches is answered MarshallingError, as
// ZooKeeper 3.9 does; the lists before it are still set, those after it are not, the
// connection carries on, and the reply's zxid is not older than a write already answered.
func TestWatchSetWatchesNullList(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		x := itest.ConnectRaw(t, addr)
		x.Create("/a", nil, 0)
		rel := x.Create("/b", nil, 0)
		c := itest.ConnectRaw(t, addr)
		hdr, err := c.Call(encoding.OpSetWatches, &encoding.SetWatches{RelativeZxid: rel, DataWatches: []string{"/a"}, ExistWatches: nil, ChildWatches: []string{"/b"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Err != encoding.ErrMarshallingError || hdr.Zxid < rel {
			t.Errorf("setWatches with a null list: err %v zxid %d; want MarshallingError and a zxid of at least %d", hdr.Err, hdr.Zxid, rel)
		}
		x.SetData("/a", []byte("1"))
		x.Create("/b/c", nil, 0)
		c.Barrier()
		wantEvents(t, "after a null exist list", c.TakeEvents(), "NodeDataChanged /a")
	})
}

// TestWatchPersistent: addWatch persistent and persistent-recursive (WatchManager, AddWatchMode).
func TestWatchPersistent(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		w := itest.ConnectRaw(t, addr)
		x := itest.ConnectRaw(t, addr)
		var er encoding.ErrorResponse
		for _, aw := range []encoding.AddWatchRequest{{Path: "/p", Mode: encoding.AddWatchPersistent}, {Path: "/r", Mode: encoding.AddWatchPersistentRecursive}} {
			hdr, err := w.Call(encoding.OpAddWatch, &aw, &er)
			if err != nil || hdr.Err != 0 || er.Err != 0 {
				t.Fatalf("addWatch %+v: %+v %+v %v", aw, hdr, er, err)
			}
		}
		// Persistent: the node's own changes and its children changing; it stays.
		x.Create("/p", nil, 0)
		x.SetData("/p", []byte("1"))
		x.SetData("/p", []byte("2"))
		x.Create("/p/c", nil, 0)
		x.SetData("/p/c", []byte("no event: not recursive"))
		x.Delete("/p/c")
		x.Delete("/p")
		wantEvents(t, "persistent", w.WaitEvents(6),
			"NodeCreated /p", "NodeDataChanged /p", "NodeDataChanged /p", "NodeChildrenChanged /p", "NodeChildrenChanged /p", "NodeDeleted /p")
		// Recursive: the node and everything below; never NodeChildrenChanged.
		x.Create("/r", nil, 0)
		x.Create("/r/a", nil, 0)
		x.Create("/r/a/b", nil, 0)
		x.SetData("/r/a/b", []byte("1"))
		x.Delete("/r/a/b")
		x.Create("/rx", nil, 0) // a sibling with the same prefix is not below /r
		wantEvents(t, "recursive", w.WaitEvents(5),
			"NodeCreated /r", "NodeCreated /r/a", "NodeCreated /r/a/b", "NodeDataChanged /r/a/b", "NodeDeleted /r/a/b")
		w.Barrier()
		wantEvents(t, "sibling", w.TakeEvents())
		// A persistent-recursive watch and a one-shot watch on the same path: one event.
		w.Watch("getData", "/r/a")
		x.SetData("/r/a", []byte("once"))
		wantEvents(t, "recursive + data on one path", w.WaitEvents(1), "NodeDataChanged /r/a")
		w.Barrier()
		wantEvents(t, "no duplicate", w.TakeEvents())
	})
}

// TestWatchCheckAndRemove: checkWatches/removeWatches on this connection's watches, NoWatcher
// when absent (WatchManager, WatcherType).
func TestWatchCheckAndRemove(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		w := itest.ConnectRaw(t, addr)
		x := itest.ConnectRaw(t, addr)
		x.Create("/n", nil, 0)
		// want sends checkWatches or removeWatches (op) of typ on /n and checks the reply's code.
		want := func(op encoding.Op, typ encoding.WatcherType, code encoding.ErrCode, what string) {
			t.Helper()
			var req encoding.Record = &encoding.RemoveWatchesRequest{Path: "/n", Type: typ}
			if op == encoding.OpCheckWatches {
				req = &encoding.CheckWatchesRequest{Path: "/n", Type: typ}
			}
			if got := w.MustCall(op, req, nil); got != code {
				t.Errorf("%s: %v, want %v", what, got, code)
			}
		}
		for _, typ := range []encoding.WatcherType{encoding.WatcherData, encoding.WatcherChildren, encoding.WatcherAny, encoding.WatcherPersistent, encoding.WatcherPersistentRecursive} {
			want(encoding.OpCheckWatches, typ, encoding.ErrNoWatcher, fmt.Sprintf("checkWatches type %d without watches", typ))
			want(encoding.OpRemoveWatches, typ, encoding.ErrNoWatcher, fmt.Sprintf("removeWatches type %d without watches", typ))
		}
		w.Watch("getData", "/n")
		want(encoding.OpCheckWatches, encoding.WatcherChildren, encoding.ErrNoWatcher, "checkWatches children with a data watch")
		want(encoding.OpCheckWatches, encoding.WatcherData, 0, "checkWatches data")
		want(encoding.OpRemoveWatches, encoding.WatcherData, 0, "removeWatches data")
		x.SetData("/n", []byte("1"))
		w.Barrier()
		wantEvents(t, "removed data watch", w.TakeEvents())
		// Any removes every kind.
		w.Watch("getData", "/n")
		w.Watch("getChildren", "/n")
		want(encoding.OpRemoveWatches, encoding.WatcherAny, 0, "removeWatches any")
		want(encoding.OpCheckWatches, encoding.WatcherAny, encoding.ErrNoWatcher, "checkWatches any after removing")
		// Persistent watches are removed by their own type.
		var er encoding.ErrorResponse
		w.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/n", Mode: encoding.AddWatchPersistent}, &er)
		want(encoding.OpCheckWatches, encoding.WatcherPersistentRecursive, encoding.ErrNoWatcher, "checkWatches recursive with a persistent watch")
		want(encoding.OpRemoveWatches, encoding.WatcherPersistent, 0, "removeWatches persistent")
		x.SetData("/n", []byte("2"))
		w.Barrier()
		wantEvents(t, "removed persistent watch", w.TakeEvents())
	})
}

// TestWatchSessionEnd: ephemerals removed by a session's close fire the same events as
// deletes, to other sessions.
func TestWatchSessionEnd(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		w := itest.ConnectRaw(t, addr)
		owner := itest.ConnectRaw(t, addr)
		w.Create("/svc", nil, 0)
		owner.Create("/svc/e", nil, encoding.ModeEphemeral)
		w.Watch("getData", "/svc/e")
		w.Watch("getChildren", "/svc")
		if hdr, err := owner.Call(encoding.OpCloseSession, nil, nil); err != nil || hdr.Err != 0 {
			t.Fatal(hdr, err)
		}
		wantEvents(t, "session close", w.WaitEvents(2), "NodeDeleted /svc/e", "NodeChildrenChanged /svc")
	})
}

// TestWatchGoZookeeper: the watch channels of go-zookeeper work as on ZooKeeper.
func TestWatchGoZookeeper(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := connect(t, addr)
		if _, err := c.Create("/gz", []byte("a"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		_, _, ch, err := c.GetW("/gz")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Set("/gz", []byte("b"), -1); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-ch:
			if ev.Type != zk.EventNodeDataChanged || ev.Path != "/gz" {
				t.Errorf("event %+v", ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event 10s after the change")
		}
	})
}

// TestWatchAcrossZetcds: a write through one zetcd fires a watch held on another zetcd of the
// same etcd, before the watching client's next reply that reflects it.
func TestWatchAcrossZetcds(t *testing.T) {
	cluster := startEtcd(t)
	a := startZetcdOn(t, cluster)
	b := startZetcdOn(t, cluster)
	wa := itest.ConnectRaw(t, a.Addr)
	xb := itest.ConnectRaw(t, b.Addr)
	xb.Create("/cross", []byte("0"), 0)
	// a may not have applied b's create yet, as a ZooKeeper follower may lag its leader: a sync
	// through a makes its next read see it.
	if code := wa.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/cross"}, &encoding.SyncResponse{}); code != 0 {
		t.Fatalf("sync on a: %v", code)
	}
	for i := 0; i < 20; i++ {
		// Read through a at least the zxid of the create, so the watch is set after it.
		if code := wa.Watch("getData", "/cross"); code != 0 {
			t.Fatalf("round %d: getData on a: %v", i, code)
		}
		z := xb.SetData("/cross", []byte(fmt.Sprint(i+1)))
		var gd encoding.GetDataResponse
		// a's client must see the event before a reply reflecting zxid >= z.
		for {
			hdr, err := wa.Call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/cross"}, &gd)
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Zxid >= z {
				break
			}
		}
		evs := wa.TakeEvents()
		wantEvents(t, fmt.Sprintf("round %d", i), evs, "NodeDataChanged /cross")
		if len(evs) == 1 && evs[0].Zxid != z {
			t.Errorf("round %d: event zxid %v, want %v", i, evs[0].Zxid, z)
		}
	}
}

// TestWatchMulti: a multi fires watches per op, in op order, even when it changes one node twice
// (delete then create, create then delete), which etcd stores as one net change.
func TestWatchMulti(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		w := itest.ConnectRaw(t, addr)
		x := itest.ConnectRaw(t, addr)
		x.Create("/mw", nil, 0)
		x.Create("/mw/n", []byte("old"), 0)
		multi := func(ops ...encoding.MultiOp) {
			t.Helper()
			var resp encoding.MultiResponse
			if code := x.MustCall(encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, &resp); code != 0 {
				t.Fatalf("multi: %v", code)
			}
			for i, r := range resp.Results {
				if r.Op == encoding.OpError {
					t.Fatalf("multi op %d failed: %v", i, r.Err)
				}
			}
		}
		del := func(p string) encoding.MultiOp {
			return encoding.MultiOp{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: p, Version: -1}}
		}
		create := func(p string) encoding.MultiOp {
			return encoding.MultiOp{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: p, ACL: itest.RawOpenACL}}
		}
		set := func(p string) encoding.MultiOp {
			return encoding.MultiOp{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: p, Data: []byte("v"), Version: -1}}
		}

		// Delete then create: the one-shot watches fire on the delete and are consumed.
		w.Watch("getData", "/mw/n")
		w.Watch("getChildren", "/mw")
		multi(del("/mw/n"), create("/mw/n"))
		wantEvents(t, "delete+create, one-shot", w.WaitEvents(2), "NodeDeleted /mw/n", "NodeChildrenChanged /mw")
		w.Barrier()
		wantEvents(t, "delete+create, nothing more", w.TakeEvents())

		// Create then delete: an exists watch on the absent node sees NodeCreated.
		if code := w.Watch("exists", "/mw/t"); code != encoding.ErrNoNode {
			t.Fatal(code)
		}
		w.Watch("getChildren", "/mw")
		multi(create("/mw/t"), set("/mw/t"), del("/mw/t"))
		wantEvents(t, "create+set+delete, one-shot", w.WaitEvents(2), "NodeCreated /mw/t", "NodeChildrenChanged /mw")

		// Persistent watches see every op, in op order, all at the multi's zxid.
		var er encoding.ErrorResponse
		w.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/mw/n", Mode: encoding.AddWatchPersistent}, &er)
		w.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/mw", Mode: encoding.AddWatchPersistent}, &er)
		multi(set("/mw/n"), del("/mw/n"), create("/mw/n"), set("/mw/n"))
		evs := w.WaitEvents(6)
		wantEvents(t, "persistent", evs,
			"NodeDataChanged /mw/n", "NodeDeleted /mw/n", "NodeChildrenChanged /mw",
			"NodeCreated /mw/n", "NodeChildrenChanged /mw", "NodeDataChanged /mw/n")
		for _, e := range evs[1:] {
			if e.Zxid != evs[0].Zxid {
				t.Errorf("multi events at different zxids: %v and %v", evs[0].Zxid, e.Zxid)
			}
		}
	})
}
