package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zksession"
)

// connectString is a parsed ZooKeeper connect string: "host:port[,host:port...][/chroot]".
type connectString struct {
	servers []string
	chroot  string // "" for none, else a path without a trailing slash
}

// parseConnectString splits off the chroot suffix the way ZooKeeper's ConnectStringParser does:
// everything from the first '/' on is the chroot, and a chroot of "/" means none.
func parseConnectString(s string) (connectString, error) {
	var cs connectString
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, cs.chroot = s[:i], s[i:]
		if cs.chroot == "/" {
			cs.chroot = ""
		} else if err := validatePath(cs.chroot); err != nil {
			return cs, fmt.Errorf("server %q: chroot: %v", s, err)
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cs.servers = append(cs.servers, h)
		}
	}
	if len(cs.servers) == 0 {
		return cs, fmt.Errorf("server %q: no host:port", s)
	}
	return cs, nil
}

// validatePath checks the shape ZooKeeper requires of a path before asking the server.
func validatePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case p[0] != '/':
		return fmt.Errorf("path %q must start with '/'", p)
	case p != "/" && strings.HasSuffix(p, "/"):
		return fmt.Errorf("path %q must not end with '/'", p)
	case strings.Contains(p, "//"):
		return fmt.Errorf("path %q has an empty segment", p)
	}
	return nil
}

// client is one ZooKeeper session with the chroot applied: every path a method takes or returns
// is relative to the chroot, as the user typed it.
type client struct {
	conn   *zk.Conn
	chroot string
	addr   string // the connect string, for messages
}

// connect opens a session to server, waits for it up to timeout, and adds digest credentials
// when auth ("user:pass") is set.
func connect(server, auth string, timeout time.Duration) (*client, error) {
	cs, err := parseConnectString(server)
	if err != nil {
		return nil, err
	}
	conn, events, err := zk.Connect(cs.servers, timeout, zk.WithLogInfo(false), zk.WithLogger(silentLogger{}))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", server, err)
	}
	if err := zksession.Await(context.Background(), events, timeout); err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect %s: %w", server, err)
	}
	c := &client{conn: conn, chroot: cs.chroot, addr: server}
	if auth != "" {
		if !strings.Contains(auth, ":") {
			conn.Close()
			return nil, fmt.Errorf("--auth %q: want user:pass", auth)
		}
		if err := conn.AddAuth("digest", []byte(auth)); err != nil {
			conn.Close()
			return nil, &opError{op: "auth", path: "digest", err: err}
		}
	}
	return c, nil
}

func (c *client) Close() { c.conn.Close() }

// abs turns a user path into the server's path under the chroot.
func (c *client) abs(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == "/" {
		return c.chroot
	}
	return c.chroot + p
}

// rel turns a server path back into a user path.
func (c *client) rel(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == c.chroot {
		return "/"
	}
	if strings.HasPrefix(p, c.chroot+"/") {
		return p[len(c.chroot):]
	}
	return p
}

// opError is a failed ZooKeeper operation: "get /a: NoNode: node does not exist".
type opError struct {
	op   string
	path string
	err  error
}

func (e *opError) Error() string {
	if name := errName(e.err); name != "" {
		return fmt.Sprintf("%s %s: %s: %s", e.op, e.path, name, errText(e.err))
	}
	return fmt.Sprintf("%s %s: %v", e.op, e.path, e.err)
}

func (e *opError) Unwrap() error { return e.err }

func opErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op: op, path: path, err: err}
}

// zkErrors maps go-zookeeper's errors to ZooKeeper's names for them (KeeperException.Code).
var zkErrors = []struct {
	err  error
	code encoding.ErrCode
}{
	{zk.ErrNoNode, encoding.ErrNoNode},
	{zk.ErrNodeExists, encoding.ErrNodeExists},
	{zk.ErrNoAuth, encoding.ErrNoAuth},
	{zk.ErrBadVersion, encoding.ErrBadVersion},
	{zk.ErrNotEmpty, encoding.ErrNotEmpty},
	{zk.ErrNoChildrenForEphemerals, encoding.ErrNoChildrenForEphemerals},
	{zk.ErrSessionExpired, encoding.ErrSessionExpired},
	{zk.ErrInvalidACL, encoding.ErrInvalidACL},
	{zk.ErrAuthFailed, encoding.ErrAuthFailed},
	{zk.ErrSessionMoved, encoding.ErrSessionMoved},
	{zk.ErrReconfigDisabled, encoding.ErrReconfigDisabled},
	{zk.ErrBadArguments, encoding.ErrBadArguments},
	{zk.ErrAPIError, encoding.ErrAPIError},
	{zk.ErrInvalidFlags, encoding.ErrBadArguments},
}

// unknownCode matches go-zookeeper's text for codes it has no error value for.
var unknownCode = regexp.MustCompile(`unknown error: (-?\d+)`)

// errCode returns the ZooKeeper result code behind err, if it carries one.
func errCode(err error) (encoding.ErrCode, bool) {
	if err == nil {
		return 0, false
	}
	var code encoding.ErrCode
	if errors.As(err, &code) {
		return code, true
	}
	for _, e := range zkErrors {
		if errors.Is(err, e.err) {
			return e.code, true
		}
	}
	if m := unknownCode.FindStringSubmatch(err.Error()); m != nil {
		if n, perr := strconv.ParseInt(m[1], 10, 32); perr == nil {
			return encoding.ErrCode(n), true
		}
	}
	return 0, false
}

// errName is ZooKeeper's name for err ("NoNode"), or "" for errors without a code.
func errName(err error) string {
	if code, ok := errCode(err); ok {
		return code.String()
	}
	return ""
}

// errText is a short explanation of a coded error.
func errText(err error) string {
	code, _ := errCode(err)
	switch code {
	case encoding.ErrNoNode:
		return "node does not exist"
	case encoding.ErrNodeExists:
		return "node already exists"
	case encoding.ErrNoAuth:
		return "not authorized"
	case encoding.ErrBadVersion:
		return "version does not match"
	case encoding.ErrNotEmpty:
		return "node has children"
	case encoding.ErrNoChildrenForEphemerals:
		return "ephemeral nodes cannot have children"
	case encoding.ErrInvalidACL:
		return "invalid ACL"
	case encoding.ErrUnimplemented:
		return "the server does not implement this operation"
	case encoding.ErrBadArguments:
		return "bad arguments"
	}
	s := err.Error()
	return strings.TrimPrefix(s, "zk: ")
}

// isCode reports whether err carries the ZooKeeper result code want.
func isCode(err error, want encoding.ErrCode) bool {
	code, ok := errCode(err)
	return ok && code == want
}

type silentLogger struct{}

func (silentLogger) Printf(string, ...any) {}
