package itest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// SendBody sends a request whose body is the given bytes, as they are, and reads up to its
// reply.
func (c *RawClient) SendBody(op encoding.Op, body []byte) encoding.ReplyHeader {
	c.T.Helper()
	c.SendBody0(op, body)
	for {
		hdr, _, err := c.ReadReply()
		if err != nil {
			c.T.Fatalf("%v: read reply: %v", op, err)
		}
		if hdr.Xid == c.Xid {
			return hdr
		}
	}
}

// LastZxid is a write's zxid: the newest zxid of the tree as this client sees it.
func (c *RawClient) LastZxid(path string) encoding.Zxid {
	c.T.Helper()
	return c.SetData(path, []byte("z"))
}

// Ping sends a ping and returns its reply's zxid.
func (c *RawClient) Ping() encoding.Zxid {
	c.T.Helper()
	c.Send(encoding.OpPing, nil)
	for {
		hdr, body, err := c.ReadReply()
		if err != nil {
			c.T.Fatalf("ping: %v", err)
		}
		switch hdr.Xid {
		case encoding.XidPing:
			return hdr.Zxid
		case encoding.XidNotification:
			var ev encoding.WatcherEvent
			if err := encoding.DecodeRecord(body, &ev); err == nil {
				c.Events = append(c.Events, RawEvent{ev, hdr.Zxid})
			}
		}
	}
}

// RawSyncEcho sends a sync of path, its bytes as they are, and returns the reply's path as the
// server wrote it.
func (c *RawClient) RawSyncEcho(path string) string {
	c.T.Helper()
	c.Send(encoding.OpSync, &encoding.SyncRequest{Path: path})
	hdr, body := c.RawReply()
	if hdr.Err != encoding.ErrOK || len(body) < 4 || int(binary.BigEndian.Uint32(body)) != len(body)-4 {
		c.T.Fatalf("sync %x: %v %x", path, hdr.Err, body)
	}
	return string(body[4:])
}

// RawReply reads up to the reply to the last request sent and returns its header and body,
// undecoded.
func (c *RawClient) RawReply() (encoding.ReplyHeader, []byte) {
	c.T.Helper()
	for {
		hdr, body, err := c.ReadReply()
		if err != nil {
			c.T.Fatalf("read reply: %v", err)
		}
		if hdr.Xid == c.Xid {
			return hdr, body
		}
	}
}

// SendBody0 sends a request whose body is the given bytes, as SendBody does, without reading.
func (c *RawClient) SendBody0(op encoding.Op, body []byte) {
	c.T.Helper()
	c.Xid++
	frame := encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: c.Xid, Op: op})
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := c.Conn.Write(frame); err != nil {
		c.T.Fatalf("write %v: %v", op, err)
	}
}

// DamagedAnswer sends payload with the next xid and an exists of / after it, and returns the
// frames that arrive before the exists is answered, watch events left out: "req" for the xid
// of payload, other xids by number, each with its code and, when the code is OK, the size of
// its body; and whether the connection is still open. A connection that closes, or that
// answers nothing for 10 s, ends the answer. Of a deleteContainer, the answer is only whether
// the connection closes.
func (c *RawClient) DamagedAnswer(payload []byte) (answer string, open bool) {
	c.Xid++
	xid := c.Xid
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	frame = append(frame, payload...)
	binary.BigEndian.PutUint32(frame[4:], uint32(xid))
	c.Xid++
	frame = encoding.AppendFrame(frame, &encoding.RequestHeader{Xid: c.Xid, Op: encoding.OpExists}, &encoding.ExistsRequest{Path: "/"})
	c.Conn.SetDeadline(time.Now().Add(10 * time.Second))
	var parts []string
	if _, err := c.Conn.Write(frame); err != nil {
		return "closed before the request was written", false
	}
	if encoding.Op(int32(binary.BigEndian.Uint32(payload[4:]))) == encoding.OpDeleteContainer {
		// ZooKeeper closes the connection of a client that sends deleteContainer, before or
		// after answering the exists, as its threads run.
		return c.DrainUntilClosed(), false
	}
	for {
		hdr, body, err := c.ReadReply()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return strings.Join(append(parts, "no answer"), ", "), false
		case err != nil:
			return strings.Join(append(parts, "closed"), ", "), false
		case hdr.Xid == encoding.XidNotification:
			continue
		case hdr.Xid == c.Xid && hdr.Err == encoding.ErrOK:
			return strings.Join(parts, ", "), true
		}
		name := fmt.Sprint(hdr.Xid)
		if hdr.Xid == xid {
			name = "req"
		}
		part := fmt.Sprintf("%s %v", name, hdr.Err)
		if hdr.Err == encoding.ErrOK {
			part += fmt.Sprintf(" %d bytes", len(body))
		}
		parts = append(parts, part)
		if hdr.Xid == xid && ClosesAfter(hdr.Err) {
			return strings.Join(append(parts, c.DrainUntilClosed()), ", "), false
		}
	}
}

// ClosesAfter reports whether a server closes the connection after answering a request with
// code. ZooKeeper closes it from another thread than the one that answers, so requests sent
// after the one answered may or may not be answered first.
func ClosesAfter(code encoding.ErrCode) bool {
	return code == encoding.ErrUnimplemented || code == encoding.ErrAuthFailed
}

// DrainUntilClosed reads and drops frames until the connection closes ("closed") or the
// deadline passes ("not closed").
func (c *RawClient) DrainUntilClosed() string {
	for {
		if _, _, err := c.ReadReply(); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return "not closed"
			}
			return "closed"
		}
	}
}

// Flood sends req as getData over and over, never reading, until stop is closed or a write
// fails.
func (c *RawClient) Flood(req encoding.Record, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c.Xid++
		c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Conn.Write(encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: c.Xid, Op: encoding.OpGetData}, req)); err != nil && !os.IsTimeout(err) {
			return
		}
	}
}
