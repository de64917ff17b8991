package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// Requests that ZooKeeper 3.9 serves under its default jute.maxbuffer (1 MiB) are served, however
// large the etcd request they make: a multi of 10,000 creates, a node name of 500,000 characters.

func TestLimitMultiOfManyCreates(t *testing.T) {
	const n = 10000
	forEachServer(t, func(t *testing.T, addr string) {
		// The raw client does not ping while it waits for a reply, as real clients do, and the
		// multi can take longer than connectRaw's 10 s session timeout under the race detector
		// on a 2-core machine (12 s seen): the longest timeout both servers grant keeps the
		// session alive, so the test is about the request's size and not its speed.
		c := connectRawTimeout(t, addr, 40000)
		c.mustCreate("/many", nil, 0)
		ops := make([]encoding.MultiOp, n)
		for i := range ops {
			ops[i] = opCreate(fmt.Sprintf("/many/n%05d", i), []byte("x"), 0)
		}
		hdr, res := c.multi(ops...)
		if hdr.Err != 0 || len(res) != n {
			t.Fatalf("multi of %d creates: %v, %d results", n, hdr.Err, len(res))
		}
		var children encoding.GetChildrenResponse
		if code := c.mustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/many"}, &children); code != 0 || len(children.Children) != n {
			t.Errorf("getChildren after the multi: %v, %d children, want %d", code, len(children.Children), n)
		}
	})
}

func TestLimitLongNodeName(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := connectRaw(t, addr)
		path := "/" + strings.Repeat("a", 500000)
		// (A failure names the node by its length: the name itself would fill the log.)
		if code := c.mustCall(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: []byte("long"), ACL: rawOpenACL}, &encoding.CreateResponse{}); code != 0 {
			t.Fatalf("create of a %d-character name: %v", len(path), code)
		}
		var data encoding.GetDataResponse
		if code := c.mustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: path}, &data); code != 0 || string(data.Data) != "long" {
			t.Errorf("getData of the long name: %v %q", code, data.Data)
		}
		var children encoding.GetChildrenResponse
		if code := c.mustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/"}, &children); code != 0 || len(children.Children) != 2 {
			t.Errorf("the root's children: %v, %d of them", code, len(children.Children))
		}
		if code := c.mustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: path, Version: -1}, nil); code != 0 {
			t.Fatalf("delete of the long name: %v", code)
		}
		if c.exists(path) {
			t.Error("the long name is still there after its delete")
		}
	})
}
