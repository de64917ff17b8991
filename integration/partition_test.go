package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/internal/testkit/tcpproxy"
)

// Network partitions between etcd members. Each member of a partitionable cluster advertises a
// peer URL that is a proxy of the test's (peerNet), which forwards to where the member listens.
// etcd's members talk over connections either end may have dialed (a member reads another's
// messages on a stream it dialed itself, and posts its own, and forwards lease renewals, on
// connections it dials), so a proxy cannot tell whose traffic a connection carries from where it
// goes: it asks the kernel which member's process holds the dialing end (/proc, Linux only).
// A cut pair of members has no connection between them: the proxy closes those it forwards and
// refuses new ones, while the members' client ports, which zetcd uses, stay reachable.

// peerNet is the proxies in front of a cluster's peer listeners and the pairs of members cut off
// from each other. Its methods may be called from any goroutine.
type peerNet struct {
	t *testing.T

	mu      sync.Mutex
	members []*etcdMember          // by index; a member's process id is read at each connection
	cut     map[[2]int]bool        // pairs of member indexes (lower first) with no connection
	links   map[*peerLink]struct{} // forwarded connections
	lost    int                    // connections whose dialer was found in no member's process
}

// peerLink is one forwarded connection from member from to member to.
type peerLink struct {
	from, to   int
	dial, peer net.Conn // the dialer's connection to the proxy, the proxy's to the member
}

// newPeerNet returns a peerNet for members that are yet to be started; listen starts its
// proxies. Tests that need it skip where there is no /proc/net/tcp.
func newPeerNet(t *testing.T) *peerNet {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("network partitions find connections' processes in /proc (Linux)")
	}
	return &peerNet{t: t, cut: map[[2]int]bool{}, links: map[*peerLink]struct{}{}}
}

// listen starts the proxy for the member at index i, forwarding to target (host:port), and
// returns its address, which the member advertises. It stops when the test ends.
func (n *peerNet) listen(i int, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	n.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go n.forward(c, i, target)
		}
	}()
	return ln.Addr().String(), nil
}

// forward carries the connection c, accepted for member to, to target, unless its dialer is a
// member cut off from to.
func (n *peerNet) forward(c net.Conn, to int, target string) {
	from := n.dialer(c)
	peer, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	l := &peerLink{from: from, to: to, dial: c, peer: peer}
	if !n.add(l) {
		c.Close()
		peer.Close()
		return
	}
	defer n.remove(l)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// Either side's end ends the link: etcd's peers keep no half-closed connections.
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(peer, c)
	go pipe(c, peer)
	<-done
	<-done
}

// add records l, unless its members are cut off from each other (false).
func (n *peerNet) add(l *peerLink) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l.from < 0 {
		// Its dialer is gone, or no member (it could only be a member's): refused while the
		// member it goes to is cut off from any other.
		n.lost++
		for p := range n.cut {
			if p[0] == l.to || p[1] == l.to {
				return false
			}
		}
	} else if n.cut[pair(l.from, l.to)] {
		return false
	}
	n.links[l] = struct{}{}
	return true
}

func (n *peerNet) remove(l *peerLink) {
	n.mu.Lock()
	delete(n.links, l)
	n.mu.Unlock()
}

// pair is the key of cut for members a and b, in either order.
func pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// setMembers says which member each proxy (by the index given to listen) is in front of.
func (n *peerNet) setMembers(ms []*etcdMember) {
	n.mu.Lock()
	n.members = ms
	n.mu.Unlock()
}

// isolate cuts the member at index i off from every other member: the connections between them
// are closed and new ones refused, until heal.
func (n *peerNet) isolate(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for j := range n.members {
		if j != i {
			n.cut[pair(i, j)] = true
		}
	}
	for l := range n.links {
		if l.from >= 0 && n.cut[pair(l.from, l.to)] {
			l.dial.Close()
			l.peer.Close()
		}
	}
}

// heal lets every member reach every other again.
func (n *peerNet) heal() {
	n.mu.Lock()
	clear(n.cut)
	n.mu.Unlock()
}

// dialer returns the index of the member whose process dialed c, or -1 if none did (or it is
// gone).
func (n *peerNet) dialer(c net.Conn) int {
	inode, ok := socketInode(c.RemoteAddr().(*net.TCPAddr), c.LocalAddr().(*net.TCPAddr))
	if !ok {
		return -1
	}
	n.mu.Lock()
	members := n.members
	n.mu.Unlock()
	for i, m := range members {
		if holdsSocket(int(m.pid.Load()), inode) {
			return i
		}
	}
	return -1
}

// socketInode returns the inode of the open TCP socket connected from local to remote (IPv4
// addresses), from /proc/net/tcp. Both ends are matched: the port of a connection that is gone
// (TIME_WAIT, inode 0) may be bound again by another.
func socketInode(local, remote *net.TCPAddr) (string, bool) {
	l, r := procNetAddr(local), procNetAddr(remote)
	if l == "" || r == "" {
		return "", false
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan() // the header
	for s.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(s.Text())
		if len(fields) >= 10 && fields[1] == l && fields[2] == r && fields[9] != "0" {
			return fields[9], true
		}
	}
	return "", false
}

// procNetAddr is addr as /proc/net/tcp writes it, in hexadecimal: the IPv4 address as a
// little-endian 32-bit word, then the port; "" if addr is not IPv4.
func procNetAddr(addr *net.TCPAddr) string {
	ip := addr.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], addr.Port)
}

// holdsSocket reports whether process pid has the socket with the given inode open.
func holdsSocket(pid int, inode string) bool {
	if pid <= 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if target, err := os.Readlink(dir + "/" + fd.Name()); err == nil && target == want {
			return true
		}
	}
	return false
}

// TestFaultEtcdMemberCutOff: an etcd follower, and in a second run the leader, is cut off from
// the other members for 20 s while a zetcd that knows every member serves. Unlike a frozen
// member, a cut-off one goes on answering on its client port: what needs no leader (its status,
// a serializable read, a watch's progress at its own revision) it answers at once, from a state
// that falls behind. zetcd's member guard reads linearizably, which the member cannot answer,
// and leaves it out; the watch feed's stream, opened with WithRequireLeader, is closed by the
// member once it has no leader. Writes and syncs carry on through the others, as with a frozen
// member (memberOut), and the cut-off member does fall behind (its revision, as its status says).
func TestFaultEtcdMemberCutOff(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			pn, ms := partitionCluster(t)
			leader, out := clusterLeader(t, ms), 0
			switch {
			case role == "leader":
				out = slices.Index(ms, leader)
			case ms[out] == leader:
				out = 1
			}
			behind := false
			memberOut(t, ms, memberFault{
				what:  "cut off",
				begin: func() { pn.isolate(out) },
				end: func() {
					behind = revision(t, ms[out]) < revision(t, ms[(out+1)%len(ms)])
					pn.heal()
				},
			})
			if !behind {
				t.Errorf("etcd member %s was not behind the others at the end of its cut-off: the cut did not hold", ms[out].name)
			}
			pn.mu.Lock()
			if pn.lost > 0 {
				t.Logf("%d peer connections whose dialer was found in no member's process", pn.lost)
			}
			pn.mu.Unlock()
		})
	}
}

// revision is the revision of m's own store, as its status says (no leader needed).
func revision(t *testing.T, m *etcdMember) int64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.clientURL)
	if err != nil {
		t.Fatalf("status of etcd member %s: %v", m.name, err)
	}
	return st.Header.Revision
}

// proxyTo starts a tcpproxy.Proxy in front of the etcd client URL clientURL, closed when the test
// ends, and returns it with the URL a zetcd reaches etcd through it by.
func proxyTo(t *testing.T, clientURL string) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(clientURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tcpproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, "http://" + p.Addr()
}
