package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/znode"
)

// The last wire differences found frame by frame against ZooKeeper 3.9, each written once and
// run on every server.

// TestWireDeleteContainer: deleteContainer (20) is the container reaper's own operation; from
// a client, ZooKeeper 3.9.6 closes the connection without an answer, deletes nothing and
// consumes no zxid, whatever the node (ContainerManager is its only caller).
func TestWireDeleteContainer(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.Create("/z", nil, 0)
		if code := c.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: "/dc", ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}, &encoding.Create2Response{}); code != 0 {
			t.Fatalf("createContainer: %v", code)
		}
		c.Create("/plain", nil, 0)
		for _, path := range []string{"/none", "/dc", "/plain"} {
			c := itest.ConnectRaw(t, addr)
			before := c.LastZxid("/z")
			c.Send(encoding.OpDeleteContainer, &encoding.DeleteContainerRequest{Path: path})
			c.ExpectClosed(0)
			after := itest.ConnectRaw(t, addr)
			// The session opened by the new connection is one zxid, the write another.
			if z := after.LastZxid("/z"); !zxidAfter(before, z, 2) {
				t.Errorf("deleteContainer %s consumed a zxid: next write at %v, want the second after %v", path, z, before)
			}
			if path != "/none" && !after.Exists(path) {
				t.Errorf("deleteContainer %s deleted it", path)
			}
		}
	})
}

// TestWireMalformedWrites: a request whose body does not decode is answered MarshallingError.
// ZooKeeper takes a zxid for a multi and for createSession (-10, refused inside a session)
// before decoding them, so those consume one; any other (a create, setData or setACL cut short)
// carries its last processed zxid and consumes none, also on a connection that has seen no
// zxid yet.
func TestWireMalformedWrites(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.Create("/m", nil, 0)
		pathPastFrame := binary.BigEndian.AppendUint32(nil, 1000) // a string longer than the frame
		for _, step := range []struct {
			name     string
			op       encoding.Op
			body     []byte
			consumes bool
		}{
			{"create cut short", encoding.OpCreate, pathPastFrame, false},
			{"setData cut short", encoding.OpSetData, append(binary.BigEndian.AppendUint32(nil, 2), '/', 'm'), false},
			{"ACL count past the frame", encoding.OpSetACL, append(append(binary.BigEndian.AppendUint32(nil, 2), '/', 'm'), 0, 0, 1, 0), false},
			{"getData cut short", encoding.OpGetData, pathPastFrame, false},
			{"multi with an unknown op type", encoding.OpMulti, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 77), 0), true},
			{"multi cut short", encoding.OpMulti, binary.BigEndian.AppendUint32(nil, uint32(encoding.OpCreate)), true},
			{"createSession inside a session", encoding.OpCreateSession, nil, true},
		} {
			before := c.LastZxid("/m")
			hdr := c.SendBody(step.op, step.body)
			if hdr.Err != encoding.ErrMarshallingError || step.consumes && !zxidAfter(before, hdr.Zxid, 1) || !step.consumes && hdr.Zxid != before {
				t.Errorf("%s: %v at zxid %v, want MarshallingError at the zxid after %v if it consumes one (%v)", step.name, hdr.Err, hdr.Zxid, before, step.consumes)
			}
			if z := c.LastZxid("/m"); !zxidAfter(hdr.Zxid, z, 1) {
				t.Errorf("%s: the next write at zxid %v, want the one after %v", step.name, z, hdr.Zxid)
			}
		}
		// A connection that has seen no zxid gets the server's last one.
		last := c.LastZxid("/m")
		fresh := itest.ConnectRaw(t, addr)
		if hdr := fresh.SendBody(encoding.OpCreate, pathPastFrame); hdr.Err != encoding.ErrMarshallingError || hdr.Zxid < last {
			t.Errorf("create cut short on a new connection: %v at zxid %v, want MarshallingError at %v or later", hdr.Err, hdr.Zxid, last)
		}
	})
}

// TestWireUnknownWatchArguments: an unknown addWatch mode or watcher type does not decode on
// ZooKeeper: MarshallingError.
func TestWireUnknownWatchArguments(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.Create("/w", nil, 0)
		for name, call := range map[string]func() encoding.ErrCode{
			"addWatch mode 7": func() encoding.ErrCode {
				return c.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/w", Mode: 7}, nil)
			},
			"removeWatches type 9": func() encoding.ErrCode {
				return c.MustCall(encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: "/w", Type: 9}, nil)
			},
			"checkWatches type 9": func() encoding.ErrCode {
				return c.MustCall(encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "/w", Type: 9}, nil)
			},
		} {
			if code := call(); code != encoding.ErrMarshallingError {
				t.Errorf("%s: %v, want MarshallingError", name, code)
			}
		}
	})
}

// TestWireZxidNeverGoesBack: after a watch event, a checkWatches reply, and a ping reply, carry
// at least the zxid the client has seen; a ping shows another session's write, and a session
// created or closed elsewhere.
func TestWireZxidNeverGoesBack(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		other := connect(t, addr)
		c.Create("/p", nil, 0)
		if code := c.Watch("getData", "/p"); code != 0 {
			t.Fatalf("getData: %v", code)
		}
		stat, err := other.Set("/p", []byte("x"), -1)
		if err != nil {
			t.Fatal(err)
		}
		ev := c.WaitEvents(1)
		if ev[0].Zxid != encoding.Zxid(stat.Mzxid) {
			t.Fatalf("event zxid %v, want %v", ev[0].Zxid, stat.Mzxid)
		}
		hdr, err := c.Call(encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "/p", Type: encoding.WatcherAny}, nil)
		if err != nil || hdr.Zxid < ev[0].Zxid {
			t.Errorf("checkWatches after an event at %v: zxid %v (%v, %v)", ev[0].Zxid, hdr.Zxid, hdr.Err, err)
		}

		// A ping after another session's write carries that write's zxid or a newer one.
		stat, err = other.Set("/p", []byte("y"), -1)
		if err != nil {
			t.Fatal(err)
		}
		if z := c.Ping(); z < encoding.Zxid(stat.Mzxid) {
			t.Errorf("ping after a write at %v elsewhere: zxid %v", stat.Mzxid, z)
		}
		// And after a session is created and closed elsewhere (each one zxid on ZooKeeper).
		before := c.Ping()
		third, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(itest.QuietLogger{}))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := third.Exists("/"); err != nil {
			t.Fatal(err)
		}
		third.Close()
		testenv.Eventually(t, 5*time.Second, fmt.Sprintf("ping zxid at least %v after a session created and closed elsewhere", before+2), func() error {
			if z := c.Ping(); z < before+2 {
				return fmt.Errorf("ping zxid %v", z)
			}
			return nil
		})
	})
}

// TestWireWrongPassword: resuming a session with a wrong password is answered with timeout 0,
// and the connection is closed.
func TestWireWrongPassword(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		owner := itest.ConnectRaw(t, addr)
		c := itest.DialRaw(t, addr)
		wrong := make([]byte, 16)
		wrong[0] = 1
		resp, err := c.Handshake(encoding.ConnectRequest{SessionID: owner.Session.SessionID, Passwd: wrong, TimeOut: 10000})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		if resp.TimeOut != 0 {
			t.Errorf("timeout %d for a wrong password, want 0", resp.TimeOut)
		}
		c.ExpectClosedWithin(0, 5*time.Second)
	})
}

// TestWireMalformedStrings: what ZooKeeper's Java decoding makes of strings a client should not
// send. Bytes that are not UTF-8 become U+FFFD as Java's new String(b, UTF_8) replaces them
// (echoed by sync, kept in an ACL id); a null string (length -1) fails the reads and delete with
// MarshallingError and is empty to sync, getEphemerals and as setData's or setACL's path; a negative ACL count other than -1 is
// an empty list (InvalidACL); a deleteContainer that does not decode closes the connection as one
// that does. A valid character outside the BMP comes back as ZooKeeper writes it, in six bytes,
// each of its UTF-16 halves on its own: from sync, getACL and whoAmI. Digest authentication
// replaces malformed bytes the same way, and fails on a null buffer.
func TestWireMalformedStrings(t *testing.T) {
	const fffd = "\xef\xbf\xbd"
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		for in, want := range map[string]string{
			"/a\xffb":                   "/a" + fffd + "b",
			"/\xe2\x82A":                "/" + fffd + "A",                      // cut short: one
			"/\xed\xa0\xbd\xed\xb8\x80": "/" + fffd + fffd,                     // a Java client's U+1F600
			"/\xc0\xaf":                 "/" + fffd + fffd,                     // overlong: one per byte
			"/\xf0\x9f\x98\x80":         "/\xed\xa0\xbd\xed\xb8\x80",           // valid, outside the BMP: as Java writes it
			"/\xf0\x9f\x98":             "/" + fffd,                            // cut short at the end
			"/\xf4\x90\x80\x80x":        "/" + fffd + fffd + fffd + fffd + "x", // past U+10FFFF
		} {
			if got := c.RawSyncEcho(in); got != want {
				t.Errorf("sync %x echoed %x, want %x", in, got, want)
			}
		}
		const emoji, emojiJava = "\U0001F600", "\xed\xa0\xbd\xed\xb8\x80"
		acl := []encoding.ACL{itest.WorldACL(encoding.PermAll), itest.ACLOf(encoding.PermAll, "digest", "u\xff"+emoji+":x")}
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/u", ACL: acl}, &encoding.CreateResponse{}); code != encoding.ErrOK {
			t.Fatalf("create /u: %v", code)
		}
		c.Send(encoding.OpGetACL, &encoding.GetACLRequest{Path: "/u"})
		if hdr, body := c.RawReply(); hdr.Err != encoding.ErrOK || !strings.Contains(string(body), "u"+fffd+emojiJava+":x") {
			t.Errorf("getACL /u: %v %x, want the digest id u%s%s:x", hdr.Err, body, fffd, emojiJava)
		}
		if code := c.MustCall(encoding.OpAuth, &encoding.AuthPacket{Scheme: "digest", Auth: []byte(emoji + ":pw")}, nil); code != encoding.ErrOK {
			t.Fatalf("auth as %s: %v", emoji, code)
		}
		c.Send(encoding.OpWhoAmI, nil)
		if hdr, body := c.RawReply(); hdr.Err != encoding.ErrOK || !strings.Contains(string(body), "\x00\x00\x00\x06"+emojiJava) {
			t.Errorf("whoAmI: %v %x, want the user %x", hdr.Err, body, emojiJava)
		}

		a := itest.ConnectRaw(t, addr)
		if code := a.MustCall(encoding.OpAuth, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("v\xe2\x82:pw")}, nil); code != encoding.ErrOK {
			t.Fatalf("auth as v\\xe2\\x82: %v", code)
		}
		a.Send(encoding.OpWhoAmI, nil)
		if hdr, body := a.RawReply(); hdr.Err != encoding.ErrOK || !strings.Contains(string(body), "\x00\x00\x00\x04v"+fffd) {
			t.Errorf("whoAmI: %v %x, want the user v%x", hdr.Err, body, fffd)
		}
		// A null auth buffer fails digest authentication, which closes the connection.
		if hdr := a.SendBody(encoding.OpAuth, []byte("\x00\x00\x00\x00\x00\x00\x00\x06digest\xff\xff\xff\xff")); hdr.Err != encoding.ErrAuthFailed {
			t.Errorf("auth with a null buffer: %v, want AuthFailed", hdr.Err)
		}
		a.ExpectClosed(0)

		null := []byte{0xff, 0xff, 0xff, 0xff}
		for _, step := range []struct {
			op   encoding.Op
			body []byte
			want encoding.ErrCode
		}{
			{encoding.OpExists, append(null, 0), encoding.ErrMarshallingError},
			{encoding.OpGetData, append(null, 0), encoding.ErrMarshallingError},
			{encoding.OpDelete, append(null, 0, 0, 0, 0), encoding.ErrMarshallingError},
			{encoding.OpSync, null, encoding.ErrOK},
			{encoding.OpSetData, append(null, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff), encoding.ErrBadArguments},
			{encoding.OpSetACL, append(null, encoding.AppendRecord(nil, &encoding.SetACLRequest{ACL: itest.RawOpenACL, Version: -1})[4:]...), encoding.ErrBadArguments},
			{encoding.OpGetEphemerals, null, encoding.ErrOK},
			// setACL /u to an ACL list of count -2.
			{encoding.OpSetACL, append(binary.BigEndian.AppendUint32(nil, 2), '/', 'u', 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff), encoding.ErrInvalidACL},
		} {
			if hdr := c.SendBody(step.op, step.body); hdr.Err != step.want {
				t.Errorf("%v %x: %v, want %v", step.op, step.body, hdr.Err, step.want)
			}
		}

		d := itest.ConnectRaw(t, addr)
		d.SendBody0(encoding.OpDeleteContainer, []byte{0, 0})
		d.ExpectClosed(0)
	})
}

// TestWireSetWatchesJavaPath: a setWatches catch-up event names the path the client sent in
// ZooKeeper's bytes, a character outside the BMP as its two surrogates of three bytes each: no
// rule keeps a watched path inside the BMP, as one keeps a node's.
func TestWireSetWatchesJavaPath(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		for path, want := range map[string]string{
			"/\U0001F600": "/\xed\xa0\xbd\xed\xb8\x80",
			"/a":          "/a",
		} {
			// A data watch on a node that does not exist: one NodeDeleted at zxid -1, then the
			// reply.
			c.Send(encoding.OpSetWatches, &encoding.SetWatches{DataWatches: []string{path}, ExistWatches: []string{}, ChildWatches: []string{}})
			hdr, body, err := c.ReadReply()
			if err != nil || hdr.Xid != encoding.XidNotification || hdr.Zxid != -1 {
				t.Fatalf("setWatches %q: first frame %+v (%v), want an event at zxid -1", path, hdr, err)
			}
			wantBody := binary.BigEndian.AppendUint32(nil, uint32(encoding.EventNodeDeleted))
			wantBody = binary.BigEndian.AppendUint32(wantBody, uint32(encoding.StateSyncConnected))
			wantBody = append(binary.BigEndian.AppendUint32(wantBody, uint32(len(want))), want...)
			if !bytes.Equal(body, wantBody) {
				t.Errorf("setWatches %q: event %x, want %x", path, body, wantBody)
			}
			if hdr, _ := c.RawReply(); hdr.Err != encoding.ErrOK {
				t.Fatalf("setWatches %q: %v", path, hdr.Err)
			}
		}
	})
}

// TestWireRootAliasWatches: "" is the root to a read, but a watch a request sets on "" stays
// under "", as ZooKeeper keeps it: checkWatches finds it by "" and not by "/", no change to the
// root fires it (those fire "/"), and setWatches compares it with the root's state, firing
// events that name "".
func TestWireRootAliasWatches(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		w := itest.ConnectRaw(t, addr)
		calls := []struct {
			what string
			op   encoding.Op
			req  encoding.Record
			want encoding.ErrCode
		}{
			{"exists '' with a watch", encoding.OpExists, &encoding.ExistsRequest{Path: "", Watch: true}, encoding.ErrOK},
			{"getChildren '' with a watch", encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "", Watch: true}, encoding.ErrOK},
			{"setData /", encoding.OpSetData, &encoding.SetDataRequest{Path: "/", Data: []byte("x"), Version: -1}, encoding.ErrOK},
			{"create /k", encoding.OpCreate, &encoding.CreateRequest{Path: "/k", ACL: itest.RawOpenACL}, encoding.ErrOK},
			{"checkWatches ''", encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "", Type: encoding.WatcherAny}, encoding.ErrOK},
			{"checkWatches /", encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "/", Type: encoding.WatcherAny}, encoding.ErrNoWatcher},
			{"addWatch '' recursive", encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "", Mode: encoding.AddWatchPersistentRecursive}, encoding.ErrOK},
			{"create /k2", encoding.OpCreate, &encoding.CreateRequest{Path: "/k2", ACL: itest.RawOpenACL}, encoding.ErrOK},
			{"removeWatches '' data", encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: "", Type: encoding.WatcherData}, encoding.ErrOK},
		}
		for _, c := range calls {
			if code := w.MustCall(c.op, c.req, nil); code != c.want {
				t.Errorf("%s: %v, want %v", c.what, code, c.want)
			}
		}
		if ev := w.TakeEvents(); len(ev) != 0 {
			t.Errorf("watches on '' fired: %v", ev)
		}

		s := itest.ConnectRaw(t, addr)
		sw := &encoding.SetWatches{RelativeZxid: 1, DataWatches: []string{""}, ExistWatches: []string{}, ChildWatches: []string{""}}
		if code := s.MustCall(encoding.OpSetWatches, sw, nil); code != encoding.ErrOK {
			t.Fatalf("setWatches: %v", code)
		}
		if ev := fmt.Sprint(s.TakeEvents()); ev != "[NodeDataChanged  NodeChildrenChanged ]" {
			t.Errorf("setWatches on '' at zxid 1: events %s, want NodeDataChanged and NodeChildrenChanged of ''", ev)
		}
		if code := s.MustCall(encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "", Type: encoding.WatcherAny}, nil); code != encoding.ErrNoWatcher {
			t.Errorf("checkWatches '' after the events: %v, want NoWatcher", code)
		}
	})
}

// TestWireNullStrings: a null string (length -1) in a create, a multi or setACL's ACL, answered
// as ZooKeeper 3.9.6 answers it, not with a closed connection. ZooKeeper's Java code
// gets a null there, and the answer is what that code does with it: a create's null path, and a
// null in any op's path of a multi, is MarshallingError (Java dereferences it); in an ACL, a null
// scheme is InvalidACL, a null id MarshallingError for world, digest and ip (InvalidACL for
// schemes without a provider), and auth's id is not looked at; a null compared with an earlier
// entry of the same perms while duplicates are removed is MarshallingError. Each consumes a zxid
// (an error txn). In a multi, MarshallingError fails the whole request; InvalidACL is its op's
// result. sync echoes a null path as null.
func TestWireNullStrings(t *testing.T) {
	const null = encoding.NullString
	world := itest.WorldACL(encoding.PermAll)
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/u", ACL: itest.RawOpenACL}, &encoding.CreateResponse{}); code != encoding.ErrOK {
			t.Fatalf("create /u: %v", code)
		}
		// call sends req as op and checks the answer's code, and that it took a zxid of its own.
		call := func(what string, op encoding.Op, req, resp encoding.Record, want encoding.ErrCode) {
			t.Helper()
			before := c.LastZxid("/u")
			hdr, err := c.Call(op, req, resp)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if hdr.Err != want || !zxidAfter(before, hdr.Zxid, 1) {
				t.Errorf("%s: %v at zxid %#x; want %v at the zxid after %#x", what, hdr.Err, hdr.Zxid, want, before)
			}
		}
		for _, op := range []encoding.Op{encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer} {
			flags := encoding.ModePersistent
			if op == encoding.OpCreateContainer {
				flags = encoding.ModeContainer
			}
			call(fmt.Sprintf("%v with a null path", op), op, &encoding.CreateRequest{Path: null, ACL: itest.RawOpenACL, Flags: flags}, nil, encoding.ErrMarshallingError)
		}
		call("createTTL with a null path", encoding.OpCreateTTL, &encoding.CreateTTLRequest{Path: null, ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL, TTL: 1000}, nil, encoding.ErrMarshallingError)
		// The flags and the TTL are checked first.
		call("createTTL with a null path and no TTL", encoding.OpCreateTTL, &encoding.CreateTTLRequest{Path: null, ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL}, nil, encoding.ErrBadArguments)
		call("create with a null path and bad flags", encoding.OpCreate, &encoding.CreateRequest{Path: null, ACL: itest.RawOpenACL, Flags: 99}, nil, encoding.ErrBadArguments)
		call("create with a null path and a null ACL id", encoding.OpCreate, &encoding.CreateRequest{Path: null, ACL: []encoding.ACL{itest.ACLOf(encoding.PermAll, "foo", null)}}, nil, encoding.ErrMarshallingError)
		call("create with a bad path and a null ACL id", encoding.OpCreate, &encoding.CreateRequest{Path: "x", ACL: []encoding.ACL{itest.ACLOf(encoding.PermAll, "world", null)}}, nil, encoding.ErrBadArguments)
		for _, step := range []struct {
			acl  []encoding.ACL
			want encoding.ErrCode
		}{
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, null, "anyone")}, encoding.ErrInvalidACL},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, "world", null)}, encoding.ErrMarshallingError},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, "digest", null)}, encoding.ErrMarshallingError},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, "ip", null)}, encoding.ErrMarshallingError},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, "auth", null)}, encoding.ErrInvalidACL},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, "foo", null)}, encoding.ErrInvalidACL},
			{[]encoding.ACL{world, itest.ACLOf(encoding.PermAll, null, "anyone")}, encoding.ErrMarshallingError},
			{[]encoding.ACL{world, itest.ACLOf(encoding.PermRead, null, "anyone")}, encoding.ErrInvalidACL},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, null, "anyone"), world}, encoding.ErrInvalidACL},
			{[]encoding.ACL{itest.ACLOf(encoding.PermAll, null, null), itest.ACLOf(encoding.PermAll, null, null)}, encoding.ErrMarshallingError},
		} {
			call(fmt.Sprintf("create with ACL %q", step.acl), encoding.OpCreate, &encoding.CreateRequest{Path: "/n", ACL: step.acl}, nil, step.want)
			call(fmt.Sprintf("setACL to %q", step.acl), encoding.OpSetACL, &encoding.SetACLRequest{Path: "/u", ACL: step.acl, Version: -1}, nil, step.want)
		}

		// auth's null id expands to the caller's identities, as an empty one does.
		a := itest.ConnectRaw(t, addr)
		if code := a.MustCall(encoding.OpAuth, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("u:p")}, nil); code != encoding.ErrOK {
			t.Fatalf("auth: %v", code)
		}
		authNull := []encoding.ACL{itest.ACLOf(encoding.PermAll, "auth", null)}
		if code := a.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/a", ACL: authNull}, &encoding.CreateResponse{}); code != encoding.ErrOK {
			t.Fatalf("create /a with ACL auth:null: %v", code)
		}
		var got encoding.GetACLResponse
		want := []encoding.ACL{itest.ACLOf(encoding.PermAll, "digest", znode.DigestID("u", "p"))}
		if code := a.MustCall(encoding.OpGetACL, &encoding.GetACLRequest{Path: "/a"}, &got); code != encoding.ErrOK || !slices.Equal(got.ACL, want) {
			t.Errorf("getACL /a: %v %q, want %q", code, got.ACL, want)
		}

		multi := func(ops ...encoding.MultiOp) *encoding.MultiRequest { return &encoding.MultiRequest{Ops: ops} }
		create := func(path string, acl []encoding.ACL) encoding.MultiOp {
			return encoding.MultiOp{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: path, ACL: acl}}
		}
		noNode := encoding.MultiOp{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/none", Version: -1}}
		setU := encoding.MultiOp{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/u", Version: -1}}
		for _, step := range []struct {
			what string
			req  *encoding.MultiRequest
			want encoding.ErrCode // the header's; ErrOK: the multi's results are answered
			ops  []encoding.ErrCode
		}{
			{"a create's null path", multi(create(null, itest.RawOpenACL)), encoding.ErrMarshallingError, nil},
			{"a null path after a failing op", multi(noNode, create(null, itest.RawOpenACL)), encoding.ErrMarshallingError, nil},
			{"a check's null path", multi(encoding.MultiOp{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: null, Version: -1}}), encoding.ErrMarshallingError, nil},
			{"world:null", multi(create("/m", []encoding.ACL{itest.ACLOf(encoding.PermAll, "world", null)})), encoding.ErrMarshallingError, nil},
			{"world:null after a failing op", multi(noNode, create("/m", []encoding.ACL{itest.ACLOf(encoding.PermAll, "world", null)})), encoding.ErrOK,
				[]encoding.ErrCode{encoding.ErrNoNode, encoding.ErrRuntimeInconsistency}},
			{"a null scheme", multi(setU, create("/m", []encoding.ACL{itest.ACLOf(encoding.PermAll, null, "anyone")})), encoding.ErrOK,
				[]encoding.ErrCode{encoding.ErrOK, encoding.ErrInvalidACL}},
		} {
			var resp encoding.MultiResponse
			call("multi, "+step.what, encoding.OpMulti, step.req, &resp, step.want)
			var ops []encoding.ErrCode
			for _, r := range resp.Results {
				ops = append(ops, r.Err)
			}
			if !slices.Equal(ops, step.ops) {
				t.Errorf("multi, %s: results %v, want %v", step.what, ops, step.ops)
			}
		}

		// sync echoes a null path as null.
		c.Send(encoding.OpSync, &encoding.SyncRequest{Path: null})
		if hdr, body := c.RawReply(); hdr.Err != encoding.ErrOK || !bytes.Equal(body, []byte{0xff, 0xff, 0xff, 0xff}) {
			t.Errorf("sync with a null path: %v %x, want OK and a null path", hdr.Err, body)
		}
	})
}
