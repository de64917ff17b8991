package integration

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
)

// TestConnEndRequestsTakeEffect: every request a server has read takes effect, in order,
// however the connection ends after it, as ZooKeeper submits every request it reads. The
// client pipelines a create of a parent and of its children in one write, ends the connection
// at once, and a fresh session then finds every child.
//
// A client that closes or resets its socket is not among the ends: ZooKeeper stops reading
// when a reply's write fails, and how much it had read by then is a race. zetcd's own part
// of it, requests read before a failed write, is TestConnEndRequestsTakeEffect in package
// zetcd.
func TestConnEndRequestsTakeEffect(t *testing.T) {
	const children = 20
	ends := []struct {
		name string
		end  func(c *rawClient)
	}{
		// The client closes its sending side and still reads the replies.
		{"halfClose", func(c *rawClient) { c.conn.(*net.TCPConn).CloseWrite() }},
		// The start of a frame that never ends.
		{"truncatedFrame", func(c *rawClient) { c.conn.Write([]byte{0, 0, 0, 40, 0, 0}); c.conn.(*net.TCPConn).CloseWrite() }},
		// A length no frame may have: the server closes the connection.
		{"lenError", func(c *rawClient) { c.conn.Write([]byte{0x7f, 0xff, 0xff, 0xff}) }},
		// A frame too short for a request header: the server closes the connection.
		{"badHeader", func(c *rawClient) { c.conn.Write([]byte{0, 0, 0, 3, 0, 0, 0}) }},
	}
	forEachServer(t, func(t *testing.T, addr string) {
		check := connect(t, addr)
		for _, e := range ends {
			t.Run(e.name, func(t *testing.T) {
				c := connectRaw(t, addr)
				parent := "/" + e.name
				b := appendRequest(nil, 1, encoding.OpCreate, &encoding.CreateRequest{Path: parent, ACL: rawOpenACL})
				for i := range children {
					child := &encoding.CreateRequest{Path: fmt.Sprintf("%s/%d", parent, i), ACL: rawOpenACL}
					b = appendRequest(b, encoding.Xid(i+2), encoding.OpCreate, child)
				}
				if _, err := c.conn.Write(b); err != nil {
					t.Fatal(err)
				}
				e.end(c)
				if got := awaitChildren(t, check, parent, children); got != children {
					t.Errorf("%d children of %s after the connection ended, want %d", got, parent, children)
				}
			})
		}
	})
}

// awaitChildren polls the children of path through c until there are n of them, or 10s have
// passed, and returns how many there are then (-1: path does not exist).
func awaitChildren(t *testing.T, c *zk.Conn, path string, n int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := -1
		names, _, err := c.Children(path)
		switch {
		case err == nil:
			got = len(names)
		case !errors.Is(err, zk.ErrNoNode):
			t.Fatalf("children of %s: %v", path, err)
		}
		if got == n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}
