package faults

import (
	"context"
	"net/url"
	"runtime"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/tcpproxy"
)

// Network partitions between etcd members. Each member of a partitionable cluster advertises a
// peer URL that is a proxy of the test's (itest.PeerNet), which forwards to where the member listens.
// etcd's members talk over connections either end may have dialed (a member reads another's
// messages on a stream it dialed itself, and posts its own, and forwards lease renewals, on
// connections it dials), so a proxy cannot tell whose traffic a connection carries from where it
// goes: it asks the kernel which member's process holds the dialing end (/proc, Linux only).
// A cut pair of members has no connection between them: the proxy closes those it forwards and
// refuses new ones, while the members' client ports, which zetcd uses, stay reachable.

// newPeerNet returns a itest.PeerNet for members that are yet to be started; listen starts its
// proxies. Tests that need it skip where there is no /proc/net/tcp.
func newPeerNet(t *testing.T) *itest.PeerNet {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("network partitions find connections' processes in /proc (Linux)")
	}
	return &itest.PeerNet{T: t, Cut: map[[2]int]bool{}, Links: map[*itest.PeerLink]struct{}{}}
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
			leader, out := itest.ClusterLeader(t, ms), 0
			switch {
			case role == "leader":
				out = slices.Index(ms, leader)
			case ms[out] == leader:
				out = 1
			}
			behind := false
			memberOut(t, ms, memberFault{
				what:  "cut off",
				begin: func() { pn.Isolate(out) },
				end: func() {
					behind = revision(t, ms[out]) < revision(t, ms[(out+1)%len(ms)])
					pn.Heal()
				},
			})
			if !behind {
				t.Errorf("etcd member %s was not behind the others at the end of its cut-off: the cut did not hold", ms[out].Name)
			}
			pn.Mu.Lock()
			if pn.Lost > 0 {
				t.Logf("%d peer connections whose dialer was found in no member's process", pn.Lost)
			}
			pn.Mu.Unlock()
		})
	}
}

// revision is the revision of m's own store, as its status says (no leader needed).
func revision(t *testing.T, m *itest.EtcdMember) int64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.ClientURL)
	if err != nil {
		t.Fatalf("status of etcd member %s: %v", m.Name, err)
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
