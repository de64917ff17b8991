package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// The Java client registers a watch when the reply of the request that set it arrives; an event
// of that watch written before the reply matches nothing there and is dropped, and a one-shot
// watch is lost for good. These tests read raw frames (go-zookeeper forgives the wrong order)
// while another session keeps changing the watched nodes.

// watchRound is one kind of request that sets a watch, raced against the writes of write,
// which fire it; the watched node is "/order-<name>".
type watchRound struct {
	name  string
	op    encoding.Op
	req   func(path string) encoding.Record
	write func(ctx context.Context, c *zk.Conn, path string, i int) // one change that fires it
	// remove, if set, removes the watch after it fired (persistent watches stay otherwise).
	remove encoding.WatcherType
}

var watchRounds = []watchRound{
	{name: "getData", op: encoding.OpGetData,
		req:   func(p string) encoding.Record { return &encoding.GetDataRequest{Path: p, Watch: true} },
		write: setDataLoop},
	{name: "exists", op: encoding.OpExists,
		req:   func(p string) encoding.Record { return &encoding.ExistsRequest{Path: p, Watch: true} },
		write: toggleLoop},
	{name: "getChildren", op: encoding.OpGetChildren,
		req:   func(p string) encoding.Record { return &encoding.GetChildrenRequest{Path: p, Watch: true} },
		write: childLoop},
	{name: "getChildren2", op: encoding.OpGetChildren2,
		req:   func(p string) encoding.Record { return &encoding.GetChildren2Request{Path: p, Watch: true} },
		write: childLoop},
	{name: "addWatch", op: encoding.OpAddWatch, remove: encoding.WatcherPersistent,
		req: func(p string) encoding.Record {
			return &encoding.AddWatchRequest{Path: p, Mode: encoding.AddWatchPersistent}
		},
		write: setDataLoop},
}

// setDataLoop keeps writing path's data.
func setDataLoop(ctx context.Context, c *zk.Conn, path string, i int) {
	c.Set(path, []byte(fmt.Sprint(i)), -1)
}

// toggleLoop keeps creating and deleting path: exists sees it present and missing in turn.
func toggleLoop(ctx context.Context, c *zk.Conn, path string, i int) {
	if i%2 == 0 {
		c.Create(path, nil, 0, openACL)
	} else {
		c.Delete(path, -1)
	}
}

// childLoop keeps adding and removing a child of path.
func childLoop(ctx context.Context, c *zk.Conn, path string, i int) {
	if i%2 == 0 {
		c.Create(path+"/c", nil, 0, openACL)
	} else {
		c.Delete(path+"/c", -1)
	}
}

// TestWatchReplyBeforeEvent races reads that set a watch against another session's writes to
// the watched node: the reply of the request that set a watch always comes before any event of
// that watch (FinalRequestProcessor), for getData, exists on a present and on a missing node,
// getChildren, getChildren2 and addWatch.
func TestWatchReplyBeforeEvent(t *testing.T) {
	const rounds = 150
	forEachServer(t, func(t *testing.T, addr string) {
		for _, wr := range watchRounds {
			t.Run(wr.name, func(t *testing.T) {
				path := "/order-" + wr.name
				setup := connect(t, addr)
				if _, err := setup.Create(path, nil, 0, openACL); err != nil {
					t.Fatal(err)
				}
				stop := startWriter(t, addr, path, wr.write)
				defer stop()
				c := itest.ConnectRaw(t, addr)
				outcomes := map[encoding.ErrCode]int{}
				for i := 0; i < rounds; i++ {
					code, early := setWatchRaw(t, c, wr.op, wr.req(path), path)
					if len(early) > 0 {
						t.Fatalf("round %d: %v on %s got %v before its reply (%v)", i, wr.op, path, eventsString(early), code)
					}
					outcomes[code]++
					c.WaitEvents(1) // the watch fires: no watch of this connection stays armed
					if wr.remove != 0 {
						removeWatchRaw(t, c, path, wr.remove)
					}
				}
				t.Logf("%d rounds, reply codes %v", rounds, outcomes)
			})
		}
	})
}

// setWatchRaw sends a request that sets a watch and reads up to its reply; early are the
// events on path that arrived before the reply. Events on other paths are kept for later.
func setWatchRaw(t *testing.T, c *itest.RawClient, op encoding.Op, req encoding.Record, path string) (code encoding.ErrCode, early []itest.RawEvent) {
	t.Helper()
	if n := len(c.Events); n > 0 {
		t.Fatalf("events pending before the request: %v", eventsString(c.Events))
	}
	hdr, err := c.Call(op, req, nil)
	if err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	for _, ev := range c.TakeEvents() {
		if ev.Path == path || ev.Path == path+"/c" {
			early = append(early, ev)
		}
	}
	return hdr.Err, early
}

// removeWatchRaw removes a persistent watch; events already queued before the reply are read
// and dropped with it.
func removeWatchRaw(t *testing.T, c *itest.RawClient, path string, typ encoding.WatcherType) {
	t.Helper()
	if code := c.MustCall(encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: path, Type: typ}, nil); code != 0 {
		t.Fatalf("removeWatches %s: %v", path, code)
	}
	c.TakeEvents()
}

// startWriter runs write in a loop on its own session until the returned stop is called.
func startWriter(t *testing.T, addr, path string, write func(context.Context, *zk.Conn, string, int)) (stop func()) {
	c := connect(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			write(ctx, c, path, i)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// TestWatchQueueConsumerNeverStalls is Curator's DistributedQueue consumer as the Java client
// runs it: list the queue with a child watch, take (delete) what it lists, and when the list is
// empty wait for the watch; an event that arrives before the reply of the getChildren that set
// the watch is dropped, as the Java client drops it. Another session keeps adding items; every
// item must be consumed without the consumer waiting out its stall timeout.
func TestWatchQueueConsumerNeverStalls(t *testing.T) {
	const items = 300
	forEachServer(t, func(t *testing.T, addr string) {
		producer := connect(t, addr)
		if _, err := producer.Create("/queue", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		go func() {
			for i := 0; i < items; i++ {
				if _, err := producer.Create("/queue/item-", nil, zk.FlagSequence, openACL); err != nil {
					return
				}
			}
		}()
		c := itest.ConnectRaw(t, addr)
		consumed := 0
		for consumed < items {
			var resp encoding.GetChildrenResponse
			hdr, err := c.Call(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/queue", Watch: true}, &resp)
			if err != nil || hdr.Err != 0 {
				t.Fatalf("getChildren: %+v %v", hdr, err)
			}
			c.TakeEvents() // before the reply: the Java client drops these
			for _, name := range resp.Children {
				if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/queue/" + name, Version: -1}, nil); code != 0 {
					t.Fatalf("take %s: %v", name, code)
				}
				consumed++
			}
			if len(resp.Children) > 0 {
				continue // the watch may still be armed; list again, as Curator does
			}
			if !c.WaitEventFor(5 * time.Second) {
				t.Fatalf("consumer stalled after %d of %d items: the child watch never fired", consumed, items)
			}
		}
	})
}

// TestCloseSessionFiresOwnWatches: a session that watches its own ephemerals and closes gets
// their NodeDeleted events, on the wire before the closeSession reply, as ZooKeeper sends them:
// the close deletes them while the session's watches are still there.
func TestCloseSessionFiresOwnWatches(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/own", nil, 0)
		c.MustCreate("/own/e", nil, encoding.ModeEphemeral)
		if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/own/e", Watch: true}, &encoding.ExistsResponse{}); code != 0 {
			t.Fatalf("exists /own/e: %v", code)
		}
		if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/own", Watch: true}, &encoding.GetChildrenResponse{}); code != 0 {
			t.Fatalf("getChildren /own: %v", code)
		}
		hdr, err := c.Call(encoding.OpCloseSession, nil, nil)
		if err != nil || hdr.Err != 0 {
			t.Fatalf("closeSession: %v %v", hdr.Err, err)
		}
		got := fmt.Sprint(c.TakeEvents())
		if want := "[NodeDeleted /own/e NodeChildrenChanged /own]"; got != want {
			t.Errorf("events before the closeSession reply: %s, want %s", got, want)
		}
	})
}
