package itest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// PeerNet is the proxies in front of a cluster's peer listeners and the pairs of members cut off
// from each other. Its methods may be called from any goroutine.
type PeerNet struct {
	T *testing.T

	Mu      sync.Mutex
	members []*EtcdMember          // by index; a member's process id is read at each connection
	Cut     map[[2]int]bool        // pairs of member indexes (lower first) with no connection
	Links   map[*PeerLink]struct{} // forwarded connections
	Lost    int                    // connections whose dialer was found in no member's process
}

// PeerLink is one forwarded connection from member from to member to.
type PeerLink struct {
	from, to   int
	dial, peer net.Conn // the dialer's connection to the proxy, the proxy's to the member
}

// Listen starts the proxy for the member at index i, forwarding to target (host:port), and
// returns its address, which the member advertises. It stops when the test ends.
func (n *PeerNet) Listen(i int, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	n.T.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go n.Forward(c, i, target)
		}
	}()
	return ln.Addr().String(), nil
}

// Forward carries the connection c, accepted for member to, to target, unless its dialer is a
// member cut off from to.
func (n *PeerNet) Forward(c net.Conn, to int, target string) {
	from := n.Dialer(c)
	peer, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	l := &PeerLink{from: from, to: to, dial: c, peer: peer}
	if !n.Add(l) {
		c.Close()
		peer.Close()
		return
	}
	defer n.Remove(l)
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

// Add records l, unless its members are cut off from each other (false).
func (n *PeerNet) Add(l *PeerLink) bool {
	n.Mu.Lock()
	defer n.Mu.Unlock()
	if l.from < 0 {
		// Its dialer is gone, or no member (it could only be a member's): refused while the
		// member it goes to is cut off from any other.
		n.Lost++
		for p := range n.Cut {
			if p[0] == l.to || p[1] == l.to {
				return false
			}
		}
	} else if n.Cut[Pair(l.from, l.to)] {
		return false
	}
	n.Links[l] = struct{}{}
	return true
}

// Remove forgets link l, once it has ended.
func (n *PeerNet) Remove(l *PeerLink) {
	n.Mu.Lock()
	delete(n.Links, l)
	n.Mu.Unlock()
}

// Pair is the key of cut for members a and b, in either order.
func Pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// SetMembers says which member each proxy (by the index given to listen) is in front of.
func (n *PeerNet) SetMembers(ms []*EtcdMember) {
	n.Mu.Lock()
	n.members = ms
	n.Mu.Unlock()
}

// Isolate cuts the member at index i off from every other member: the connections between them
// are closed and new ones refused, until heal.
func (n *PeerNet) Isolate(i int) {
	n.Mu.Lock()
	defer n.Mu.Unlock()
	for j := range n.members {
		if j != i {
			n.Cut[Pair(i, j)] = true
		}
	}
	for l := range n.Links {
		if l.from >= 0 && n.Cut[Pair(l.from, l.to)] {
			l.dial.Close()
			l.peer.Close()
		}
	}
}

// Heal lets every member reach every other again.
func (n *PeerNet) Heal() {
	n.Mu.Lock()
	clear(n.Cut)
	n.Mu.Unlock()
}

// Dialer returns the index of the member whose process dialed c, or -1 if none did (or it is
// gone).
func (n *PeerNet) Dialer(c net.Conn) int {
	inode, ok := SocketInode(c.RemoteAddr().(*net.TCPAddr), c.LocalAddr().(*net.TCPAddr))
	if !ok {
		return -1
	}
	n.Mu.Lock()
	members := n.members
	n.Mu.Unlock()
	for i, m := range members {
		if HoldsSocket(int(m.pid.Load()), inode) {
			return i
		}
	}
	return -1
}

// SocketInode returns the inode of the open TCP socket connected from local to remote (IPv4
// addresses), from /proc/net/tcp. Both ends are matched: the port of a connection that is gone
// (TIME_WAIT, inode 0) may be bound again by another.
func SocketInode(local, remote *net.TCPAddr) (string, bool) {
	l, r := ProcNetAddr(local), ProcNetAddr(remote)
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

// ProcNetAddr is addr as /proc/net/tcp writes it, in hexadecimal: the IPv4 address as a
// little-endian 32-bit word, then the port; "" if addr is not IPv4.
func ProcNetAddr(addr *net.TCPAddr) string {
	ip := addr.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], addr.Port)
}

// HoldsSocket reports whether process pid has the socket with the given inode open.
func HoldsSocket(pid int, inode string) bool {
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
