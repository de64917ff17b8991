package encoding

import "encoding/binary"

// NewRequest returns a fresh zero record for the body of a client request
// with opcode op, ready to Decode into. ok is false for opcodes a client
// never sends: notification (0), the unused 10, error (-1), createSession
// (-10; clients use ConnectRequest instead) and unknown values. ZooKeeper
// answers those with Unimplemented.
//
// check (13) yields *CheckVersionRequest even though it is only valid inside
// multi: decoding it lets the server reply before deciding it is invalid.
func NewRequest(op Op) (Record, bool) {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		return &CreateRequest{}, true
	case OpCreateTTL:
		return &CreateTTLRequest{}, true
	case OpDelete:
		return &DeleteRequest{}, true
	case OpExists:
		return &ExistsRequest{}, true
	case OpGetData:
		return &GetDataRequest{}, true
	case OpSetData:
		return &SetDataRequest{}, true
	case OpGetACL:
		return &GetACLRequest{}, true
	case OpSetACL:
		return &SetACLRequest{}, true
	case OpGetChildren:
		return &GetChildrenRequest{}, true
	case OpSync:
		return &SyncRequest{}, true
	case OpPing, OpCloseSession, OpWhoAmI:
		return &Empty{}, true
	case OpGetChildren2:
		return &GetChildren2Request{}, true
	case OpCheck:
		return &CheckVersionRequest{}, true
	case OpMulti, OpMultiRead:
		return &MultiRequest{}, true
	case OpReconfig:
		return &ReconfigRequest{}, true
	case OpCheckWatches:
		return &CheckWatchesRequest{}, true
	case OpRemoveWatches:
		return &RemoveWatchesRequest{}, true
	case OpDeleteContainer:
		return &DeleteContainerRequest{}, true
	case OpAuth:
		return &AuthPacket{}, true
	case OpSetWatches:
		return &SetWatches{}, true
	case OpSasl:
		return &GetSASLRequest{}, true
	case OpGetEphemerals:
		return &GetEphemeralsRequest{}, true
	case OpGetAllChildrenNumber:
		return &GetAllChildrenNumberRequest{}, true
	case OpSetWatches2:
		return &SetWatches2{}, true
	case OpAddWatch:
		return &AddWatchRequest{}, true
	}
	return nil, false
}

// NewResponse returns a fresh zero record for the body of a successful reply
// to op (ZooDefs.OpCode, zookeeper.jute). Replies that are a header only get *Empty. A failed
// reply has no body at all, whatever the op.
//
// Two entries are not replies to a request but are included because a
// client reading frames needs them: notification (0) yields *WatcherEvent,
// the body of every xid -1 frame, and error (-1) yields *ErrorResponse, the
// body of a failed op inside a multi response. check (13) yields *Empty,
// its (bodiless) result inside multi. ok is false for 10, createSession
// (-10) and unknown values.
func NewResponse(op Op) (Record, bool) {
	switch op {
	case OpNotification:
		return &WatcherEvent{}, true
	case OpCreate:
		return &CreateResponse{}, true
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		return &Create2Response{}, true
	case OpExists:
		return &ExistsResponse{}, true
	case OpGetData, OpReconfig:
		return &GetDataResponse{}, true
	case OpSetData:
		return &SetDataResponse{}, true
	case OpGetACL:
		return &GetACLResponse{}, true
	case OpSetACL:
		return &SetACLResponse{}, true
	case OpGetChildren:
		return &GetChildrenResponse{}, true
	case OpGetChildren2:
		return &GetChildren2Response{}, true
	case OpSync:
		return &SyncResponse{}, true
	case OpMulti, OpMultiRead:
		return &MultiResponse{}, true
	case OpSasl:
		return &SetSASLResponse{}, true
	case OpGetEphemerals:
		return &GetEphemeralsResponse{}, true
	case OpGetAllChildrenNumber:
		return &GetAllChildrenNumberResponse{}, true
	case OpAddWatch, OpError:
		return &ErrorResponse{}, true
	case OpWhoAmI:
		return &WhoAmIResponse{}, true
	case OpDelete, OpPing, OpCheck, OpCheckWatches, OpRemoveWatches, OpDeleteContainer,
		OpAuth, OpSetWatches, OpSetWatches2, OpCloseSession:
		return &Empty{}, true
	}
	return nil, false
}

// fourLetterWords are the commands ZooKeeper recognises in place of a frame
// length on a fresh connection (FourLetterCommands).
var fourLetterWords = map[string]bool{
	"conf": true, "cons": true, "crst": true, "dirs": true, "dump": true, "envi": true,
	"gtmk": true, "hash": true, "isro": true, "mntr": true, "ruok": true, "srst": true,
	"srvr": true, "stat": true, "stmk": true, "wchc": true, "wchp": true, "wchs": true,
}

// FourLetterWord reports whether length, the first four bytes of a fresh
// connection read as a big-endian int32, spells one of ZooKeeper's
// four-letter-word commands, and returns the command. Every command word is
// a positive length above DefaultMaxFrameBytes, so the check is unambiguous
// for frames within the default limit; callers should make it before
// rejecting the length. For "stmk" the caller must read a further 8-byte
// mask.
func FourLetterWord(length int32) (string, bool) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(length))
	w := string(b[:])
	if fourLetterWords[w] {
		return w, true
	}
	return "", false
}
