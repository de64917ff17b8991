package itest

import (
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// RawOpenACL is world:anyone with every permission, for RawClient requests.
var RawOpenACL = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

// Multi sends a multi (14) and returns its reply header and results; it fails the test on a
// transport error.
func (c *RawClient) Multi(ops ...encoding.MultiOp) (encoding.ReplyHeader, []encoding.MultiResult) {
	c.T.Helper()
	var resp encoding.MultiResponse
	hdr, err := c.Call(encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, &resp)
	if err != nil {
		c.T.Fatalf("multi: %v", err)
	}
	return hdr, resp.Results
}

// MustCreate creates a persistent node with the raw client and returns the create's zxid.
func (c *RawClient) MustCreate(path string, data []byte, flags encoding.CreateMode) encoding.Zxid {
	c.T.Helper()
	hdr, err := c.Call(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: data, ACL: RawOpenACL, Flags: flags}, &encoding.CreateResponse{})
	if err != nil || hdr.Err != 0 {
		c.T.Fatalf("create %s: %v %v", path, hdr.Err, err)
	}
	return hdr.Zxid
}

// Stat reads a node's Stat (getData), failing the test if it does not exist.
func (c *RawClient) Stat(path string) (encoding.Stat, []byte) {
	c.T.Helper()
	var gd encoding.GetDataResponse
	if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: path}, &gd); code != 0 {
		c.T.Fatalf("getData %s: %v", path, code)
	}
	return gd.Stat, gd.Data
}

// Exists reports whether path exists; any answer but OK or NoNode fails the test.
func (c *RawClient) Exists(path string) bool {
	c.T.Helper()
	code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: path}, &encoding.ExistsResponse{})
	if code != 0 && code != encoding.ErrNoNode {
		c.T.Fatalf("exists %s: %v", path, code)
	}
	return code == 0
}

// Create creates path with data and mode under RawOpenACL and returns the write's zxid; it
// fails the test unless the create succeeds.
func (c *RawClient) Create(path string, data []byte, mode encoding.CreateMode) encoding.Zxid {
	c.T.Helper()
	hdr, err := c.Call(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: data, ACL: RawOpenACL, Flags: mode}, &encoding.CreateResponse{})
	if err != nil || hdr.Err != 0 {
		c.T.Fatalf("create %s: %+v %v", path, hdr, err)
	}
	return hdr.Zxid
}

// SetData sets path's data, any version, and returns the write's zxid; it fails the test
// unless the write succeeds.
func (c *RawClient) SetData(path string, data []byte) encoding.Zxid {
	c.T.Helper()
	hdr, err := c.Call(encoding.OpSetData, &encoding.SetDataRequest{Path: path, Data: data, Version: -1}, &encoding.SetDataResponse{})
	if err != nil || hdr.Err != 0 {
		c.T.Fatalf("setData %s: %+v %v", path, hdr, err)
	}
	return hdr.Zxid
}

// Delete deletes path, any version, and returns the write's zxid; it fails the test unless
// the delete succeeds.
func (c *RawClient) Delete(path string) encoding.Zxid {
	c.T.Helper()
	hdr, err := c.Call(encoding.OpDelete, &encoding.DeleteRequest{Path: path, Version: -1}, nil)
	if err != nil || hdr.Err != 0 {
		c.T.Fatalf("delete %s: %+v %v", path, hdr, err)
	}
	return hdr.Zxid
}

// Watch sets a watch with a read op: "exists", "getData", "getChildren" or "getChildren2".
func (c *RawClient) Watch(op, path string) encoding.ErrCode {
	c.T.Helper()
	switch op {
	case "exists":
		return c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: path, Watch: true}, &encoding.ExistsResponse{})
	case "getData":
		return c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: path, Watch: true}, &encoding.GetDataResponse{})
	case "getChildren":
		return c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: path, Watch: true}, &encoding.GetChildrenResponse{})
	case "getChildren2":
		return c.MustCall(encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: path, Watch: true}, &encoding.GetChildren2Response{})
	}
	c.T.Fatalf("unknown watch op %q", op)
	return 0
}

// Barrier is a request whose reply comes after every event already due on the connection.
func (c *RawClient) Barrier() {
	c.T.Helper()
	c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{})
}

// WaitEventFor reads frames until a notification arrives (true) or d passes (false).
func (c *RawClient) WaitEventFor(d time.Duration) bool {
	c.T.Helper()
	if len(c.Events) > 0 {
		c.TakeEvents()
		return true
	}
	c.Conn.SetReadDeadline(time.Now().Add(d))
	defer c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		hdr, _, err := c.ReadReply()
		if err != nil {
			return false
		}
		if hdr.Xid == encoding.XidNotification {
			return true
		}
	}
}
