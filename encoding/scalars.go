package encoding

import (
	"strconv"
	"strings"
)

// Xid is the client-chosen request id echoed in the reply header. Negative
// values are reserved for the special packets below.
type Xid int32

// Special xids, as ClientCnxn uses them.
const (
	XidNotification Xid = -1 // server → client watch event
	XidPing         Xid = -2
	XidAuth         Xid = -4
	XidSetWatches   Xid = -8 // setWatches/setWatches2 sent on reconnect
)

var xidNames = map[Xid]string{
	XidNotification: "notification",
	XidPing:         "ping",
	XidAuth:         "auth",
	XidSetWatches:   "setWatches",
}

// String returns the name of a special xid, or the decimal value otherwise.
func (x Xid) String() string {
	if s, ok := xidNames[x]; ok {
		return s
	}
	return strconv.FormatInt(int64(x), 10)
}

// Zxid is a ZooKeeper transaction id.
type Zxid int64

// String formats z in hex, as ZooKeeper's own logs and 4lw output do
// ("0x1f"). Negative values (notifications carry -1) print as "-0x1".
func (z Zxid) String() string {
	if z < 0 {
		return "-0x" + strconv.FormatUint(uint64(-z), 16)
	}
	return "0x" + strconv.FormatUint(uint64(z), 16)
}

// SessionID identifies a client session.
type SessionID int64

// String formats s as "0x" followed by 16 hex digits, so ids whose top bit is
// set (ZooKeeper puts the server id in the top byte) print as unsigned.
func (s SessionID) String() string {
	const digits = "0123456789abcdef"
	var b [18]byte
	b[0], b[1] = '0', 'x'
	u := uint64(s)
	for i := 17; i >= 2; i-- {
		b[i] = digits[u&0xf]
		u >>= 4
	}
	return string(b[:])
}

// Op is a request type (ZooDefs.OpCode), carried in RequestHeader and in
// MultiHeader.
type Op int32

// Opcodes (ZooDefs.OpCode).
const (
	OpNotification         Op = 0
	OpCreate               Op = 1
	OpDelete               Op = 2
	OpExists               Op = 3
	OpGetData              Op = 4
	OpSetData              Op = 5
	OpGetACL               Op = 6
	OpSetACL               Op = 7
	OpGetChildren          Op = 8
	OpSync                 Op = 9
	OpPing                 Op = 11
	OpGetChildren2         Op = 12
	OpCheck                Op = 13
	OpMulti                Op = 14
	OpCreate2              Op = 15
	OpReconfig             Op = 16
	OpCheckWatches         Op = 17
	OpRemoveWatches        Op = 18
	OpCreateContainer      Op = 19
	OpDeleteContainer      Op = 20
	OpCreateTTL            Op = 21
	OpMultiRead            Op = 22
	OpAuth                 Op = 100
	OpSetWatches           Op = 101
	OpSasl                 Op = 102
	OpGetEphemerals        Op = 103
	OpGetAllChildrenNumber Op = 104
	OpSetWatches2          Op = 105
	OpAddWatch             Op = 106
	OpWhoAmI               Op = 107
	OpCreateSession        Op = -10
	OpCloseSession         Op = -11
	OpError                Op = -1
)

// opNames uses ZooKeeper's own spelling of each opcode so logs can be
// compared with a real server's.
var opNames = map[Op]string{
	OpNotification:         "notification",
	OpCreate:               "create",
	OpDelete:               "delete",
	OpExists:               "exists",
	OpGetData:              "getData",
	OpSetData:              "setData",
	OpGetACL:               "getACL",
	OpSetACL:               "setACL",
	OpGetChildren:          "getChildren",
	OpSync:                 "sync",
	OpPing:                 "ping",
	OpGetChildren2:         "getChildren2",
	OpCheck:                "check",
	OpMulti:                "multi",
	OpCreate2:              "create2",
	OpReconfig:             "reconfig",
	OpCheckWatches:         "checkWatches",
	OpRemoveWatches:        "removeWatches",
	OpCreateContainer:      "createContainer",
	OpDeleteContainer:      "deleteContainer",
	OpCreateTTL:            "createTTL",
	OpMultiRead:            "multiRead",
	OpAuth:                 "auth",
	OpSetWatches:           "setWatches",
	OpSasl:                 "sasl",
	OpGetEphemerals:        "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2:          "setWatches2",
	OpAddWatch:             "addWatch",
	OpWhoAmI:               "whoAmI",
	OpCreateSession:        "createSession",
	OpCloseSession:         "closeSession",
	OpError:                "error",
}

func (o Op) String() string { return name(opNames, o, "Op") }

// ErrCode is a ZooKeeper result code (KeeperException.Code). It travels in
// ReplyHeader.Err and in multi results. It implements error so handlers can
// return a code directly; ErrOK must never be returned as a non-nil error.
type ErrCode int32

// Result codes (KeeperException.Code).
const (
	ErrOK                           ErrCode = 0
	ErrSystemError                  ErrCode = -1
	ErrRuntimeInconsistency         ErrCode = -2
	ErrDataInconsistency            ErrCode = -3
	ErrConnectionLoss               ErrCode = -4
	ErrMarshallingError             ErrCode = -5
	ErrUnimplemented                ErrCode = -6
	ErrOperationTimeout             ErrCode = -7
	ErrBadArguments                 ErrCode = -8
	ErrUnknownSession               ErrCode = -12
	ErrNewConfigNoQuorum            ErrCode = -13
	ErrReconfigInProgress           ErrCode = -14
	ErrAPIError                     ErrCode = -100
	ErrNoNode                       ErrCode = -101
	ErrNoAuth                       ErrCode = -102
	ErrBadVersion                   ErrCode = -103
	ErrNoChildrenForEphemerals      ErrCode = -108
	ErrNodeExists                   ErrCode = -110
	ErrNotEmpty                     ErrCode = -111
	ErrSessionExpired               ErrCode = -112
	ErrInvalidCallback              ErrCode = -113
	ErrInvalidACL                   ErrCode = -114
	ErrAuthFailed                   ErrCode = -115
	ErrSessionMoved                 ErrCode = -118
	ErrNotReadOnly                  ErrCode = -119
	ErrEphemeralOnLocalSession      ErrCode = -120
	ErrNoWatcher                    ErrCode = -121
	ErrRequestTimeout               ErrCode = -122
	ErrReconfigDisabled             ErrCode = -123
	ErrSessionClosedRequireSaslAuth ErrCode = -124
	ErrQuotaExceeded                ErrCode = -125
	ErrThrottledOp                  ErrCode = -127
)

var errNames = map[ErrCode]string{
	ErrOK:                           "OK",
	ErrSystemError:                  "SystemError",
	ErrRuntimeInconsistency:         "RuntimeInconsistency",
	ErrDataInconsistency:            "DataInconsistency",
	ErrConnectionLoss:               "ConnectionLoss",
	ErrMarshallingError:             "MarshallingError",
	ErrUnimplemented:                "Unimplemented",
	ErrOperationTimeout:             "OperationTimeout",
	ErrBadArguments:                 "BadArguments",
	ErrUnknownSession:               "UnknownSession",
	ErrNewConfigNoQuorum:            "NewConfigNoQuorum",
	ErrReconfigInProgress:           "ReconfigInProgress",
	ErrAPIError:                     "APIError",
	ErrNoNode:                       "NoNode",
	ErrNoAuth:                       "NoAuth",
	ErrBadVersion:                   "BadVersion",
	ErrNoChildrenForEphemerals:      "NoChildrenForEphemerals",
	ErrNodeExists:                   "NodeExists",
	ErrNotEmpty:                     "NotEmpty",
	ErrSessionExpired:               "SessionExpired",
	ErrInvalidCallback:              "InvalidCallback",
	ErrInvalidACL:                   "InvalidACL",
	ErrAuthFailed:                   "AuthFailed",
	ErrSessionMoved:                 "SessionMoved",
	ErrNotReadOnly:                  "NotReadOnly",
	ErrEphemeralOnLocalSession:      "EphemeralOnLocalSession",
	ErrNoWatcher:                    "NoWatcher",
	ErrRequestTimeout:               "RequestTimeout",
	ErrReconfigDisabled:             "ReconfigDisabled",
	ErrSessionClosedRequireSaslAuth: "SessionClosedRequireSaslAuth",
	ErrQuotaExceeded:                "QuotaExceeded",
	ErrThrottledOp:                  "ThrottledOp",
}

// String returns the KeeperException.Code name, e.g. "NoNode".
func (e ErrCode) String() string { return name(errNames, e, "ErrCode") }

// Error returns e.g. "zk: NoNode (-101)".
func (e ErrCode) Error() string {
	return "zk: " + e.String() + " (" + strconv.FormatInt(int64(e), 10) + ")"
}

// EventType is the type of a WatcherEvent.
type EventType int32

// Event types (Watcher.Event.EventType). The server only sends 1–4; the rest are
// synthesised by client libraries.
const (
	EventNone                   EventType = -1
	EventNodeCreated            EventType = 1
	EventNodeDeleted            EventType = 2
	EventNodeDataChanged        EventType = 3
	EventNodeChildrenChanged    EventType = 4
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

var eventNames = map[EventType]string{
	EventNone:                   "None",
	EventNodeCreated:            "NodeCreated",
	EventNodeDeleted:            "NodeDeleted",
	EventNodeDataChanged:        "NodeDataChanged",
	EventNodeChildrenChanged:    "NodeChildrenChanged",
	EventDataWatchRemoved:       "DataWatchRemoved",
	EventChildWatchRemoved:      "ChildWatchRemoved",
	EventPersistentWatchRemoved: "PersistentWatchRemoved",
}

func (t EventType) String() string { return name(eventNames, t, "EventType") }

// KeeperState is the connection state carried in a WatcherEvent.
type KeeperState int32

// Keeper states (Watcher.Event.KeeperState). The server only ever sends
// StateSyncConnected in events.
const (
	StateUnknown           KeeperState = -1
	StateDisconnected      KeeperState = 0
	StateNoSyncConnected   KeeperState = 1
	StateSyncConnected     KeeperState = 3
	StateAuthFailed        KeeperState = 4
	StateConnectedReadOnly KeeperState = 5
	StateSaslAuthenticated KeeperState = 6
	StateClosed            KeeperState = 7
	StateExpired           KeeperState = -112
)

var stateNames = map[KeeperState]string{
	StateUnknown:           "Unknown",
	StateDisconnected:      "Disconnected",
	StateNoSyncConnected:   "NoSyncConnected",
	StateSyncConnected:     "SyncConnected",
	StateAuthFailed:        "AuthFailed",
	StateConnectedReadOnly: "ConnectedReadOnly",
	StateSaslAuthenticated: "SaslAuthenticated",
	StateClosed:            "Closed",
	StateExpired:           "Expired",
}

func (s KeeperState) String() string { return name(stateNames, s, "KeeperState") }

// CreateMode is the flags field of create requests. Values outside 0–6 are
// representable because they arrive from the wire; the server answers them
// with BadArguments (check Valid).
type CreateMode int32

// Create modes (CreateMode).
const (
	ModePersistent                  CreateMode = 0
	ModeEphemeral                   CreateMode = 1
	ModePersistentSequential        CreateMode = 2
	ModeEphemeralSequential         CreateMode = 3
	ModeContainer                   CreateMode = 4
	ModePersistentWithTTL           CreateMode = 5
	ModePersistentSequentialWithTTL CreateMode = 6
)

var modeNames = map[CreateMode]string{
	ModePersistent:                  "Persistent",
	ModeEphemeral:                   "Ephemeral",
	ModePersistentSequential:        "PersistentSequential",
	ModeEphemeralSequential:         "EphemeralSequential",
	ModeContainer:                   "Container",
	ModePersistentWithTTL:           "PersistentWithTTL",
	ModePersistentSequentialWithTTL: "PersistentSequentialWithTTL",
}

func (m CreateMode) String() string { return name(modeNames, m, "CreateMode") }

// Valid reports whether m is one of the seven modes ZooKeeper accepts.
func (m CreateMode) Valid() bool { return m >= ModePersistent && m <= ModePersistentSequentialWithTTL }

// IsEphemeral reports whether nodes created with m die with their session.
// Containers and TTL nodes are not session ephemerals.
func (m CreateMode) IsEphemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// IsSequential reports whether the server appends a sequence suffix.
func (m CreateMode) IsSequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialWithTTL
}

// IsContainer reports whether m creates a container node.
func (m CreateMode) IsContainer() bool { return m == ModeContainer }

// IsTTL reports whether m creates a node that expires after a TTL.
func (m CreateMode) IsTTL() bool {
	return m == ModePersistentWithTTL || m == ModePersistentSequentialWithTTL
}

// WatcherType selects which watches checkWatches/removeWatches look at.
type WatcherType int32

// Watcher types (Watcher.WatcherType).
const (
	WatcherChildren            WatcherType = 1
	WatcherData                WatcherType = 2
	WatcherAny                 WatcherType = 3
	WatcherPersistent          WatcherType = 4
	WatcherPersistentRecursive WatcherType = 5
)

var watcherNames = map[WatcherType]string{
	WatcherChildren:            "Children",
	WatcherData:                "Data",
	WatcherAny:                 "Any",
	WatcherPersistent:          "Persistent",
	WatcherPersistentRecursive: "PersistentRecursive",
}

func (w WatcherType) String() string { return name(watcherNames, w, "WatcherType") }

// AddWatchMode is the mode of an addWatch request.
type AddWatchMode int32

// addWatch modes.
const (
	AddWatchPersistent          AddWatchMode = 0
	AddWatchPersistentRecursive AddWatchMode = 1
)

var addWatchNames = map[AddWatchMode]string{
	AddWatchPersistent:          "Persistent",
	AddWatchPersistentRecursive: "PersistentRecursive",
}

func (m AddWatchMode) String() string { return name(addWatchNames, m, "AddWatchMode") }

// Perm is a set of ACL permission bits (ZooDefs.Perms).
type Perm int32

// Permission bits.
const (
	PermRead   Perm = 1 << 0
	PermWrite  Perm = 1 << 1
	PermCreate Perm = 1 << 2
	PermDelete Perm = 1 << 3
	PermAdmin  Perm = 1 << 4
	PermAll         = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// String spells the bits the way zkCli does ("cdrwa" for PermAll, "r" for
// read only). Zero prints "none"; bits outside PermAll are appended in hex so
// nothing on the wire is hidden from logs.
func (p Perm) String() string {
	if p == 0 {
		return "none"
	}
	var sb strings.Builder
	for _, b := range [...]struct {
		bit Perm
		c   byte
	}{{PermCreate, 'c'}, {PermDelete, 'd'}, {PermRead, 'r'}, {PermWrite, 'w'}, {PermAdmin, 'a'}} {
		if p&b.bit != 0 {
			sb.WriteByte(b.c)
		}
	}
	if extra := p &^ PermAll; extra != 0 {
		if sb.Len() > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString("0x")
		sb.WriteString(strconv.FormatUint(uint64(uint32(extra)), 16))
	}
	return sb.String()
}

// name looks v up in names and falls back to "Type(v)" so unknown values
// from the wire remain visible in logs.
func name[T ~int32](names map[T]string, v T, typ string) string {
	if s, ok := names[v]; ok {
		return s
	}
	return typ + "(" + strconv.FormatInt(int64(v), 10) + ")"
}
