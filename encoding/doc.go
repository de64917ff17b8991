// Package encoding is the wire codec for the Apache ZooKeeper client
// protocol: length-prefixed frames carrying records in ZooKeeper's "jute"
// binary serialisation.
//
// It knows bytes, not semantics. It decodes every record a client or server
// can send, bounds every length it reads by the input it was given, and
// never panics on hostile input; what a request means, and which error code
// answers it, is decided elsewhere. Standard library only.
//
// # Jute
//
// Records are their fields concatenated in declared order, big-endian, with
// no tags or padding:
//
//	int       4 bytes, two's complement
//	long      8 bytes
//	boolean   1 byte, 0 or 1 (any non-zero byte decodes as true)
//	buffer    int length, then the bytes; length -1 is null, distinct from 0
//	ustring   int length, then UTF-8; -1 is null (decoded as "", or as NullString
//	          where ZooKeeper's answer depends on it)
//	vector<T> int count, then the elements; -1 is null
//
// Null and empty are kept apart: a nil []byte or []string encodes as -1 and
// decodes back to nil; a non-nil empty one encodes as 0 and decodes as a
// non-nil empty slice.
//
// # Frames
//
// Both directions of a connection are a stream of frames:
//
//	+---------------------+---------------------------------------+
//	| length: int32 (BE)  | payload: length bytes                 |
//	+---------------------+---------------------------------------+
//
// A length below zero or above the limit (DefaultMaxFrameBytes unless
// configured) is a protocol violation; ReadFrame rejects it without reading
// the payload and the connection must be closed. On a fresh connection the
// first four bytes may instead spell a four-letter-word command such as
// "ruok" (see FourLetterWord).
//
// # Handshake
//
// The first frame in each direction is a bare record, without a header. The
// readOnly byte at the end of each is optional (see ConnectRequest); with
// the usual 16-byte password the payloads are 44 or 45 bytes and 36 or 37.
// Offsets below are within the payload, after the frame's length prefix.
//
//	ConnectRequest (client → server)
//	  0        4                  12       16                 24       28               44    45
//	  +--------+------------------+--------+------------------+--------+----------------+-----+
//	  | protoV | lastZxidSeen     | timeOut| sessionId        | pwLen  | passwd (16)    | ro? |
//	  | int    | long             | int    | long             | int    | bytes          | bool|
//	  +--------+------------------+--------+------------------+--------+----------------+-----+
//
//	ConnectResponse (server → client)
//	  0        4        8                  16       20               36    37
//	  +--------+--------+------------------+--------+----------------+-----+
//	  | protoV | timeOut| sessionId        | pwLen  | passwd (16)    | ro? |
//	  +--------+--------+------------------+--------+----------------+-----+
//
// # Requests and replies
//
// Every later client frame is a RequestHeader followed by the request record
// for its op (see NewRequest); every later server frame is a ReplyHeader
// followed, on success, by the response record (see NewResponse). Offsets
// below are within the whole frame:
//
//	Request frame
//	  0        4        8        12
//	  +--------+--------+--------+-----------------------------+
//	  | length | xid    | op     | request record ...          |
//	  +--------+--------+--------+-----------------------------+
//
//	Reply frame
//	  0        4        8                  16       20
//	  +--------+--------+------------------+--------+----------------------+
//	  | length | xid    | zxid             | err    | response record ...  |
//	  +--------+--------+------------------+--------+----------------------+
//
// The reply echoes the request's xid. When err is non-zero the reply is the
// header alone, except for multi, whose header err is 0 even when it failed
// and whose body lists per-op results (see MultiResponse). Some xids are
// special: -1 marks a watch notification whose body is a WatcherEvent, -2 a
// ping, -4 an auth packet and -8 a setWatches sent on reconnect.
//
// # Usage
//
// A server reads with one reusable buffer and decodes into fresh records:
//
//	buf, err := encoding.ReadFrame(conn, buf, encoding.DefaultMaxFrameBytes)
//	d := encoding.NewDecoder(buf)
//	var h encoding.RequestHeader
//	h.Decode(d)
//	req, ok := encoding.NewRequest(h.Op)
//	if !ok { /* reply Unimplemented, close */ }
//	req.Decode(d)
//	if d.Err() != nil { /* reply MarshallingError */ }
//
// and replies with
//
//	out = encoding.AppendFrame(out[:0], &encoding.ReplyHeader{Xid: h.Xid, Zxid: zxid}, resp)
//
// Records returned by a Decoder never alias its input, so the read buffer can
// be reused for the next frame at once.
package encoding
