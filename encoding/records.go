package encoding

// Records from zookeeper.jute. Field order is wire order; every Decode reads
// all fields and relies on the Decoder's sticky error.

// StatSize is the encoded size of a Stat.
const StatSize = 68

// Stat is a znode's metadata (org.apache.zookeeper.data.Stat).
type Stat struct {
	Czxid          Zxid      // zxid of the create
	Mzxid          Zxid      // zxid of the last setData
	Ctime          int64     // ms since the epoch
	Mtime          int64     // ms since the epoch
	Version        int32     // data version
	Cversion       int32     // child list version
	Aversion       int32     // ACL version
	EphemeralOwner SessionID // owning session for ephemerals, else 0 (or a TTL/container marker)
	DataLength     int32
	NumChildren    int32
	Pzxid          Zxid // zxid of the last child list change
}

func (s *Stat) Encode(e *Encoder) {
	e.Int64(int64(s.Czxid))
	e.Int64(int64(s.Mzxid))
	e.Int64(s.Ctime)
	e.Int64(s.Mtime)
	e.Int32(s.Version)
	e.Int32(s.Cversion)
	e.Int32(s.Aversion)
	e.Int64(int64(s.EphemeralOwner))
	e.Int32(s.DataLength)
	e.Int32(s.NumChildren)
	e.Int64(int64(s.Pzxid))
}

func (s *Stat) Decode(d *Decoder) {
	s.Czxid = Zxid(d.Int64())
	s.Mzxid = Zxid(d.Int64())
	s.Ctime = d.Int64()
	s.Mtime = d.Int64()
	s.Version = d.Int32()
	s.Cversion = d.Int32()
	s.Aversion = d.Int32()
	s.EphemeralOwner = SessionID(d.Int64())
	s.DataLength = d.Int32()
	s.NumChildren = d.Int32()
	s.Pzxid = Zxid(d.Int64())
}

// ID is an ACL identity: a scheme ("world", "digest", "ip", "auth", ...)
// and a scheme-specific id.
type ID struct {
	Scheme string
	ID     string
}

func (i *ID) Encode(e *Encoder) {
	e.String(i.Scheme)
	e.String(i.ID)
}

func (i *ID) Decode(d *Decoder) {
	i.Scheme = d.knownString(knownIDStrings)
	i.ID = d.knownString(knownIDStrings)
}

// knownIDStrings are the schemes, and the one id, that nearly every ACL names: decoded to these
// strings, not to a copy each (a create carries its ACL, mostly world:anyone).
var knownIDStrings = []string{"world", "anyone", "digest", "ip", "auth", "x509", "sasl", "super"}

// ACL grants Perms to ID.
type ACL struct {
	Perms Perm
	ID    ID
}

// aclMinSize is the smallest encoding of an ACL: perms and two empty strings.
const aclMinSize = 12

func (a *ACL) Encode(e *Encoder) {
	e.Int32(int32(a.Perms))
	a.ID.Encode(e)
}

func (a *ACL) Decode(d *Decoder) {
	a.Perms = Perm(d.Int32())
	a.ID.Decode(d)
}

func encodeACLs(e *Encoder, acl []ACL) {
	if acl == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(acl)))
	for i := range acl {
		acl[i].Encode(e)
	}
}

// AppendACLRecord appends what AppendRecord appends for SetACLRequest{ACL: acl} (empty path,
// version 0): the form in which a list of ACLs is stored. Unlike AppendRecord with a record
// made for it, it allocates nothing but b's growth.
func AppendACLRecord(b []byte, acl []ACL) []byte {
	e := Encoder{buf: b}
	e.String("")
	encodeACLs(&e, acl)
	e.Int32(0)
	return e.buf
}

// decodeACLs reads a vector<ACL>; null decodes as nil, empty as non-nil.
func decodeACLs(d *Decoder) []ACL {
	n := d.VectorLen(aclMinSize)
	if n < 0 {
		return nil
	}
	acl := make([]ACL, n)
	for i := range acl {
		acl[i].Decode(d)
	}
	if d.Err() != nil {
		return nil
	}
	return acl
}

// ConnectRequest is the first frame a client sends, with no RequestHeader.
//
// The trailing readOnly byte is optional on the wire (pre-3.4 clients and
// go-zookeeper omit it, making the body 44 bytes with a 16-byte password
// instead of 45). HasReadOnly records whether it was present: Decode sets it
// when at least one byte follows Passwd, and Encode writes the byte only
// when it is set. A server should answer in the same form it was asked.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    Zxid
	TimeOut         int32 // requested session timeout, ms
	SessionID       SessionID
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool // not a wire field; see above
}

func (c *ConnectRequest) Encode(e *Encoder) {
	e.Int32(c.ProtocolVersion)
	e.Int64(int64(c.LastZxidSeen))
	e.Int32(c.TimeOut)
	e.Int64(int64(c.SessionID))
	e.Buffer(c.Passwd)
	if c.HasReadOnly {
		e.Bool(c.ReadOnly)
	}
}

func (c *ConnectRequest) Decode(d *Decoder) {
	c.ProtocolVersion = d.Int32()
	c.LastZxidSeen = Zxid(d.Int64())
	c.TimeOut = d.Int32()
	c.SessionID = SessionID(d.Int64())
	c.Passwd = d.Buffer()
	c.ReadOnly, c.HasReadOnly = false, false
	if d.Remaining() >= 1 {
		c.ReadOnly = d.Bool()
		c.HasReadOnly = true
	}
}

// ConnectResponse is the first frame the server sends, with no ReplyHeader.
// HasReadOnly follows the same rule as in ConnectRequest.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32 // negotiated session timeout, ms; 0 means the session is invalid
	SessionID       SessionID
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool // not a wire field
}

func (c *ConnectResponse) Encode(e *Encoder) {
	e.Int32(c.ProtocolVersion)
	e.Int32(c.TimeOut)
	e.Int64(int64(c.SessionID))
	e.Buffer(c.Passwd)
	if c.HasReadOnly {
		e.Bool(c.ReadOnly)
	}
}

func (c *ConnectResponse) Decode(d *Decoder) {
	c.ProtocolVersion = d.Int32()
	c.TimeOut = d.Int32()
	c.SessionID = SessionID(d.Int64())
	c.Passwd = d.Buffer()
	c.ReadOnly, c.HasReadOnly = false, false
	if d.Remaining() >= 1 {
		c.ReadOnly = d.Bool()
		c.HasReadOnly = true
	}
}

// RequestHeader starts every client frame after the handshake.
type RequestHeader struct {
	Xid Xid
	Op  Op
}

// RequestHeaderSize is the encoded size of a RequestHeader.
const RequestHeaderSize = 8

func (h *RequestHeader) Encode(e *Encoder) {
	e.Int32(int32(h.Xid))
	e.Int32(int32(h.Op))
}

func (h *RequestHeader) Decode(d *Decoder) {
	h.Xid = Xid(d.Int32())
	h.Op = Op(d.Int32())
}

// ReplyHeader starts every server frame after the handshake. When Err is
// not ErrOK the frame carries no body (multi excepted).
type ReplyHeader struct {
	Xid  Xid
	Zxid Zxid
	Err  ErrCode
}

// ReplyHeaderSize is the encoded size of a ReplyHeader.
const ReplyHeaderSize = 16

func (h *ReplyHeader) Encode(e *Encoder) {
	e.Int32(int32(h.Xid))
	e.Int64(int64(h.Zxid))
	e.Int32(int32(h.Err))
}

func (h *ReplyHeader) Decode(d *Decoder) {
	h.Xid = Xid(d.Int32())
	h.Zxid = Zxid(d.Int64())
	h.Err = ErrCode(d.Int32())
}

// WatcherEvent is the body of a notification (xid -1).
type WatcherEvent struct {
	Type  EventType
	State KeeperState
	Path  string
}

func (w *WatcherEvent) Encode(e *Encoder) {
	e.Int32(int32(w.Type))
	e.Int32(int32(w.State))
	e.String(w.Path)
}

func (w *WatcherEvent) Decode(d *Decoder) {
	w.Type = EventType(d.Int32())
	w.State = KeeperState(d.Int32())
	w.Path = d.String()
}

// CreateRequest is the body of create (1), create2 (15) and
// createContainer (19).
type CreateRequest struct {
	Path  string
	Data  []byte // nil creates a node with null data
	ACL   []ACL
	Flags CreateMode
}

func (r *CreateRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Buffer(r.Data)
	encodeACLs(e, r.ACL)
	e.Int32(int32(r.Flags))
}

func (r *CreateRequest) Decode(d *Decoder) {
	r.Path = d.NullableString()
	r.Data = d.Buffer()
	r.ACL = decodeACLs(d)
	r.Flags = CreateMode(d.Int32())
}

// CreateTTLRequest is the body of createTTL (21). TTL is in milliseconds.
type CreateTTLRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
	TTL   int64
}

func (r *CreateTTLRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Buffer(r.Data)
	encodeACLs(e, r.ACL)
	e.Int32(int32(r.Flags))
	e.Int64(r.TTL)
}

func (r *CreateTTLRequest) Decode(d *Decoder) {
	r.Path = d.NullableString()
	r.Data = d.Buffer()
	r.ACL = decodeACLs(d)
	r.Flags = CreateMode(d.Int32())
	r.TTL = d.Int64()
}

// CreateResponse answers create (1) with the actual path, including any
// sequence suffix.
type CreateResponse struct {
	Path string
}

func (r *CreateResponse) Encode(e *Encoder) { e.String(r.Path) }
func (r *CreateResponse) Decode(d *Decoder) { r.Path = d.String() }

// Create2Response answers create2, createContainer and createTTL.
type Create2Response struct {
	Path string
	Stat Stat
}

func (r *Create2Response) Encode(e *Encoder) {
	e.String(r.Path)
	r.Stat.Encode(e)
}

func (r *Create2Response) Decode(d *Decoder) {
	r.Path = d.String()
	r.Stat.Decode(d)
}

// DeleteRequest is the body of delete (2). Version -1 matches any version.
type DeleteRequest struct {
	Path    string
	Version int32
}

func (r *DeleteRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(r.Version)
}

func (r *DeleteRequest) Decode(d *Decoder) {
	r.Path = d.NullableString()
	r.Version = d.Int32()
}

// ExistsRequest is the body of exists (3).
type ExistsRequest struct {
	Path  string
	Watch bool
}

func (r *ExistsRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

func (r *ExistsRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// ExistsResponse answers exists when the node exists.
type ExistsResponse struct {
	Stat Stat
}

func (r *ExistsResponse) Encode(e *Encoder) { r.Stat.Encode(e) }
func (r *ExistsResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// GetDataRequest is the body of getData (4).
type GetDataRequest struct {
	Path  string
	Watch bool
}

func (r *GetDataRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

func (r *GetDataRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// GetDataResponse answers getData and reconfig. Data nil means the node
// holds null data.
type GetDataResponse struct {
	Data []byte
	Stat Stat
}

func (r *GetDataResponse) Encode(e *Encoder) {
	e.Buffer(r.Data)
	r.Stat.Encode(e)
}

func (r *GetDataResponse) Decode(d *Decoder) {
	r.Data = d.Buffer()
	r.Stat.Decode(d)
}

// SetDataRequest is the body of setData (5).
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32
}

func (r *SetDataRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Buffer(r.Data)
	e.Int32(r.Version)
}

func (r *SetDataRequest) Decode(d *Decoder) {
	r.Path = d.NullableString()
	r.Data = d.Buffer()
	r.Version = d.Int32()
}

// SetDataResponse answers setData.
type SetDataResponse struct {
	Stat Stat
}

func (r *SetDataResponse) Encode(e *Encoder) { r.Stat.Encode(e) }
func (r *SetDataResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// GetACLRequest is the body of getACL (6).
type GetACLRequest struct {
	Path string
}

func (r *GetACLRequest) Encode(e *Encoder) { e.String(r.Path) }
func (r *GetACLRequest) Decode(d *Decoder) { r.Path = d.String() }

// GetACLResponse answers getACL.
type GetACLResponse struct {
	ACL  []ACL
	Stat Stat
}

func (r *GetACLResponse) Encode(e *Encoder) {
	encodeACLs(e, r.ACL)
	r.Stat.Encode(e)
}

func (r *GetACLResponse) Decode(d *Decoder) {
	r.ACL = decodeACLs(d)
	r.Stat.Decode(d)
}

// SetACLRequest is the body of setACL (7). Version is compared with the
// node's aversion.
type SetACLRequest struct {
	Path    string
	ACL     []ACL
	Version int32
}

func (r *SetACLRequest) Encode(e *Encoder) {
	e.String(r.Path)
	encodeACLs(e, r.ACL)
	e.Int32(r.Version)
}

func (r *SetACLRequest) Decode(d *Decoder) {
	r.Path = d.NullableString()
	r.ACL = decodeACLs(d)
	r.Version = d.Int32()
}

// SetACLResponse answers setACL.
type SetACLResponse struct {
	Stat Stat
}

func (r *SetACLResponse) Encode(e *Encoder) { r.Stat.Encode(e) }
func (r *SetACLResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// GetChildrenRequest is the body of getChildren (8).
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

func (r *GetChildrenRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

func (r *GetChildrenRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// GetChildrenResponse answers getChildren with child names (not paths).
type GetChildrenResponse struct {
	Children []string
}

func (r *GetChildrenResponse) Encode(e *Encoder) { e.Strings(r.Children) }
func (r *GetChildrenResponse) Decode(d *Decoder) { r.Children = d.Strings() }

// GetChildren2Request is the body of getChildren2 (12).
type GetChildren2Request struct {
	Path  string
	Watch bool
}

func (r *GetChildren2Request) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

func (r *GetChildren2Request) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// GetChildren2Response answers getChildren2.
type GetChildren2Response struct {
	Children []string
	Stat     Stat
}

func (r *GetChildren2Response) Encode(e *Encoder) {
	e.Strings(r.Children)
	r.Stat.Encode(e)
}

func (r *GetChildren2Response) Decode(d *Decoder) {
	r.Children = d.Strings()
	r.Stat.Decode(d)
}

// SyncRequest is the body of sync (9).
type SyncRequest struct {
	Path string
}

func (r *SyncRequest) Encode(e *Encoder) { e.String(r.Path) }
func (r *SyncRequest) Decode(d *Decoder) { r.Path = d.NullableString() }

// SyncResponse answers sync.
type SyncResponse struct {
	Path string
}

func (r *SyncResponse) Encode(e *Encoder) { e.String(r.Path) }
func (r *SyncResponse) Decode(d *Decoder) { r.Path = d.NullableString() }

// CheckVersionRequest is the body of check (13), valid only inside multi.
type CheckVersionRequest struct {
	Path    string
	Version int32
}

func (r *CheckVersionRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(r.Version)
}

func (r *CheckVersionRequest) Decode(d *Decoder) {
	r.Path = d.NullableString()
	r.Version = d.Int32()
}

// ReconfigRequest is the body of reconfig (16).
type ReconfigRequest struct {
	JoiningServers string
	LeavingServers string
	NewMembers     string
	CurConfigID    int64
}

func (r *ReconfigRequest) Encode(e *Encoder) {
	e.String(r.JoiningServers)
	e.String(r.LeavingServers)
	e.String(r.NewMembers)
	e.Int64(r.CurConfigID)
}

func (r *ReconfigRequest) Decode(d *Decoder) {
	r.JoiningServers = d.String()
	r.LeavingServers = d.String()
	r.NewMembers = d.String()
	r.CurConfigID = d.Int64()
}

// CheckWatchesRequest is the body of checkWatches (17).
type CheckWatchesRequest struct {
	Path string
	Type WatcherType
}

func (r *CheckWatchesRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(int32(r.Type))
}

func (r *CheckWatchesRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Type = WatcherType(d.Int32())
}

// RemoveWatchesRequest is the body of removeWatches (18).
type RemoveWatchesRequest struct {
	Path string
	Type WatcherType
}

func (r *RemoveWatchesRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(int32(r.Type))
}

func (r *RemoveWatchesRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Type = WatcherType(d.Int32())
}

// DeleteContainerRequest is the body of deleteContainer (20). The jute type
// of the path is buffer, not ustring; both are an int length and the raw
// bytes, so the codec is the same, and a null path decodes as "".
type DeleteContainerRequest struct {
	Path string
}

func (r *DeleteContainerRequest) Encode(e *Encoder) { e.String(r.Path) }
func (r *DeleteContainerRequest) Decode(d *Decoder) { r.Path = d.String() }

// AuthPacket is the body of auth (100), sent with xid -4. Type is unused by
// ZooKeeper and sent as 0.
type AuthPacket struct {
	Type   int32
	Scheme string
	Auth   []byte
}

func (r *AuthPacket) Encode(e *Encoder) {
	e.Int32(r.Type)
	e.String(r.Scheme)
	e.Buffer(r.Auth)
}

func (r *AuthPacket) Decode(d *Decoder) {
	r.Type = d.Int32()
	r.Scheme = d.String()
	r.Auth = d.Buffer()
}

// SetWatches is the body of setWatches (101): watches a reconnecting client
// re-registers, relative to the last zxid it saw.
type SetWatches struct {
	RelativeZxid Zxid
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

func (r *SetWatches) Encode(e *Encoder) {
	e.Int64(int64(r.RelativeZxid))
	e.Strings(r.DataWatches)
	e.Strings(r.ExistWatches)
	e.Strings(r.ChildWatches)
}

func (r *SetWatches) Decode(d *Decoder) {
	r.RelativeZxid = Zxid(d.Int64())
	r.DataWatches = d.Strings()
	r.ExistWatches = d.Strings()
	r.ChildWatches = d.Strings()
}

// SetWatches2 is the body of setWatches2 (105), which adds persistent
// watches to SetWatches.
type SetWatches2 struct {
	RelativeZxid               Zxid
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string
}

func (r *SetWatches2) Encode(e *Encoder) {
	e.Int64(int64(r.RelativeZxid))
	e.Strings(r.DataWatches)
	e.Strings(r.ExistWatches)
	e.Strings(r.ChildWatches)
	e.Strings(r.PersistentWatches)
	e.Strings(r.PersistentRecursiveWatches)
}

func (r *SetWatches2) Decode(d *Decoder) {
	r.RelativeZxid = Zxid(d.Int64())
	r.DataWatches = d.Strings()
	r.ExistWatches = d.Strings()
	r.ChildWatches = d.Strings()
	r.PersistentWatches = d.Strings()
	r.PersistentRecursiveWatches = d.Strings()
}

// GetSASLRequest is the body of sasl (102).
type GetSASLRequest struct {
	Token []byte
}

func (r *GetSASLRequest) Encode(e *Encoder) { e.Buffer(r.Token) }
func (r *GetSASLRequest) Decode(d *Decoder) { r.Token = d.Buffer() }

// SetSASLResponse answers sasl.
type SetSASLResponse struct {
	Token []byte
}

func (r *SetSASLResponse) Encode(e *Encoder) { e.Buffer(r.Token) }
func (r *SetSASLResponse) Decode(d *Decoder) { r.Token = d.Buffer() }

// GetEphemeralsRequest is the body of getEphemerals (103).
type GetEphemeralsRequest struct {
	PrefixPath string
}

func (r *GetEphemeralsRequest) Encode(e *Encoder) { e.String(r.PrefixPath) }
func (r *GetEphemeralsRequest) Decode(d *Decoder) { r.PrefixPath = d.String() }

// GetEphemeralsResponse answers getEphemerals with full paths.
type GetEphemeralsResponse struct {
	Ephemerals []string
}

func (r *GetEphemeralsResponse) Encode(e *Encoder) { e.Strings(r.Ephemerals) }
func (r *GetEphemeralsResponse) Decode(d *Decoder) { r.Ephemerals = d.Strings() }

// GetAllChildrenNumberRequest is the body of getAllChildrenNumber (104).
type GetAllChildrenNumberRequest struct {
	Path string
}

func (r *GetAllChildrenNumberRequest) Encode(e *Encoder) { e.String(r.Path) }
func (r *GetAllChildrenNumberRequest) Decode(d *Decoder) { r.Path = d.String() }

// GetAllChildrenNumberResponse answers getAllChildrenNumber with the number
// of descendants.
type GetAllChildrenNumberResponse struct {
	TotalNumber int32
}

func (r *GetAllChildrenNumberResponse) Encode(e *Encoder) { e.Int32(r.TotalNumber) }
func (r *GetAllChildrenNumberResponse) Decode(d *Decoder) { r.TotalNumber = d.Int32() }

// AddWatchRequest is the body of addWatch (106).
type AddWatchRequest struct {
	Path string
	Mode AddWatchMode
}

func (r *AddWatchRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(int32(r.Mode))
}

func (r *AddWatchRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Mode = AddWatchMode(d.Int32())
}

// ErrorResponse is a bare result code: the success body of addWatch (with
// ErrOK) and the body of an error result inside a multi response.
type ErrorResponse struct {
	Err ErrCode
}

func (r *ErrorResponse) Encode(e *Encoder) { e.Int32(int32(r.Err)) }
func (r *ErrorResponse) Decode(d *Decoder) { r.Err = ErrCode(d.Int32()) }

// ClientInfo is one authenticated identity of a session.
type ClientInfo struct {
	AuthScheme string
	User       string
}

func (c *ClientInfo) Encode(e *Encoder) {
	e.String(c.AuthScheme)
	e.String(c.User)
}

func (c *ClientInfo) Decode(d *Decoder) {
	c.AuthScheme = d.String()
	c.User = d.String()
}

// WhoAmIResponse answers whoAmI (107).
type WhoAmIResponse struct {
	ClientInfo []ClientInfo
}

func (r *WhoAmIResponse) Encode(e *Encoder) {
	if r.ClientInfo == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(r.ClientInfo)))
	for i := range r.ClientInfo {
		r.ClientInfo[i].Encode(e)
	}
}

func (r *WhoAmIResponse) Decode(d *Decoder) {
	r.ClientInfo = nil
	n := d.VectorLen(8) // two empty strings
	if n < 0 {
		return
	}
	ci := make([]ClientInfo, n)
	for i := range ci {
		ci[i].Decode(d)
	}
	if d.Err() == nil {
		r.ClientInfo = ci
	}
}

// Empty is the zero-byte record: the body of ping, closeSession and whoAmI
// requests and of replies that are a header only (delete, setWatches, auth,
// ...).
type Empty struct{}

func (*Empty) Encode(*Encoder) {}
func (*Empty) Decode(*Decoder) {}

// MultiHeader precedes each op (and each result) in multi and multiRead,
// and a header with Done set terminates the sequence.
type MultiHeader struct {
	Type Op
	Done bool
	Err  ErrCode
}

// multiHeaderSize is the encoded size of a MultiHeader.
const multiHeaderSize = 9

func (h *MultiHeader) Encode(e *Encoder) {
	e.Int32(int32(h.Type))
	e.Bool(h.Done)
	e.Int32(int32(h.Err))
}

func (h *MultiHeader) Decode(d *Decoder) {
	h.Type = Op(d.Int32())
	h.Done = d.Bool()
	h.Err = ErrCode(d.Int32())
}
