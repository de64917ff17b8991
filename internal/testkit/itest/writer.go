package itest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

var worldACL = zk.WorldACL(zk.PermAll)

// Writer changes the tree at addr under root until stop is closed, with every kind of write:
// creates (sequential ones, containers, TTL nodes), deletes, setData, setACL, multis, and the
// ephemerals of sessions that close or stay; its multis set /app/cfg, which History makes. It
// reports how many rounds it made.
func Writer(t testing.TB, addr, root string, stop <-chan struct{}) <-chan int {
	rounds := make(chan int, 1)
	c := testenv.Connect(t, addr)
	_, err := c.Create(root, nil, 0, worldACL)
	testenv.Must(t, err)
	_, err = c.Create(root+"/acl", []byte("a"), 0, worldACL)
	testenv.Must(t, err)
	go func() {
		i := 0
		defer func() { rounds <- i }()
		check := func(what string, err error, allowed ...error) bool {
			for _, a := range allowed {
				if errors.Is(err, a) {
					return true
				}
			}
			if err != nil {
				t.Errorf("round %d: %s: %v", i, what, err)
				return false
			}
			return true
		}
		var open *zk.Conn // a session left open with its ephemeral
		defer func() {
			if open != nil {
				t.Cleanup(open.Close)
			}
		}()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("%s/n-%d", root, i)
			if _, err := c.Create(p, []byte(p), 0, worldACL); !check("create", err) {
				return
			}
			if i > 0 {
				_, err := c.Set(fmt.Sprintf("%s/n-%d", root, i-1), []byte("set"), -1)
				if !check("setData", err, zk.ErrNoNode) {
					return
				}
			}
			if i%3 == 2 && !check("delete", c.Delete(fmt.Sprintf("%s/n-%d", root, i-2), -1), zk.ErrNoNode) {
				return
			}
			_, err := c.SetACL(root+"/acl", append(zk.DigestACL(zk.PermAll, "u", fmt.Sprint(i)), worldACL...), -1)
			if !check("setACL", err) {
				return
			}
			_, err = c.Multi(
				&zk.CreateRequest{Path: fmt.Sprintf("%s/m-%d", root, i), Data: []byte("m"), Acl: worldACL},
				&zk.SetDataRequest{Path: "/app/cfg", Data: []byte(fmt.Sprint(i)), Version: -1},
				&zk.CreateRequest{Path: root + "/seq-", Acl: worldACL, Flags: zk.FlagSequence},
			)
			if !check("multi", err) {
				return
			}
			if i > 0 && !check("delete multi's", c.Delete(fmt.Sprintf("%s/m-%d", root, i-1), -1)) {
				return
			}
			if i%5 == 0 {
				_, err = c.CreateContainer(fmt.Sprintf("%s/c-%d", root, i), nil, zk.FlagContainer, worldACL)
				check("container", err)
				_, err = c.CreateTTL(fmt.Sprintf("%s/ttl-%d", root, i), nil, zk.FlagTTL, worldACL, time.Hour)
				check("ttl", err)
			}
			if i%7 == 0 {
				s, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
				if !check("connect", err) {
					return
				}
				_, err = s.Create(fmt.Sprintf("%s/eph-%d", root, i), nil, zk.FlagEphemeral, worldACL)
				check("ephemeral", err)
				_, err = s.Create(root+"/eseq-", nil, zk.FlagEphemeralSequential, worldACL)
				check("ephemeral sequential", err)
				if open != nil {
					open.Close()
				}
				open = s
			}
		}
	}()
	return rounds
}
