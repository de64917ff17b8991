package integration

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
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
		end  func(c *itest.RawClient)
	}{
		// The client closes its sending side and still reads the replies.
		{"halfClose", func(c *itest.RawClient) { c.Conn.(*net.TCPConn).CloseWrite() }},
		// The start of a frame that never ends.
		{"truncatedFrame", func(c *itest.RawClient) { c.Conn.Write([]byte{0, 0, 0, 40, 0, 0}); c.Conn.(*net.TCPConn).CloseWrite() }},
		// A length no frame may have: the server closes the connection.
		{"lenError", func(c *itest.RawClient) { c.Conn.Write([]byte{0x7f, 0xff, 0xff, 0xff}) }},
		// A frame too short for a request header: the server closes the connection.
		{"badHeader", func(c *itest.RawClient) { c.Conn.Write([]byte{0, 0, 0, 3, 0, 0, 0}) }},
	}
	forEachServer(t, func(t *testing.T, addr string) {
		check := connect(t, addr)
		for _, e := range ends {
			t.Run(e.name, func(t *testing.T) {
				c := itest.ConnectRaw(t, addr)
				parent := "/" + e.name
				b := itest.AppendRequest(nil, 1, encoding.OpCreate, &encoding.CreateRequest{Path: parent, ACL: itest.RawOpenACL})
				for i := range children {
					child := &encoding.CreateRequest{Path: fmt.Sprintf("%s/%d", parent, i), ACL: itest.RawOpenACL}
					b = itest.AppendRequest(b, encoding.Xid(i+2), encoding.OpCreate, child)
				}
				if _, err := c.Conn.Write(b); err != nil {
					t.Fatal(err)
				}
				e.end(c)
				testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d children of %s after the connection ended", children, parent), func() error {
					names, _, err := check.Children(parent)
					switch {
					case errors.Is(err, zk.ErrNoNode):
						return err
					case err != nil:
						t.Fatalf("children of %s: %v", parent, err)
					case len(names) != children:
						return fmt.Errorf("%d children", len(names))
					}
					return nil
				})
			})
		}
	})
}
