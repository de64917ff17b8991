package etcdstore

import (
	"net"
	"testing"

	"github.com/zetcd/zetcd/internal/znode"
)

func TestRemoteIP(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{nil, ""},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "127.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, "0:0:0:0:0:0:0:1"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::ff00:42:8329"), Port: 1}, "2001:db8:0:0:0:ff00:42:8329"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, "fe80:0:0:0:0:0:0:1%eth0"},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "/tmp/s"},
	} {
		if got := znode.RemoteIP(tc.addr); got != tc.want {
			t.Errorf("znode.RemoteIP(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
