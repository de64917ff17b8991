// Package zksession waits for a go-zookeeper session to be established: the step every client
// in this repository (zkctl, zkboom, the test harnesses) takes between zk.Connect and its first
// request. It knows go-zookeeper and the standard library only.
package zksession

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// ErrAuthFailed is returned by Await when the server rejected the session's credentials.
var ErrAuthFailed = errors.New("authentication failed")

// Await reads the events of zk.Connect until they report a session, and from then on drains
// them in the background: go-zookeeper blocks on a full event channel, so a caller that waits
// for the session and reads no further events would otherwise stall the connection.
//
// It returns nil once there is a session; ErrAuthFailed if the server refuses the credentials
// first; an error saying "no session after <timeout>" when timeout passes first; and ctx.Err()
// when ctx ends first. On an error the events are not drained: the caller is expected to close
// the connection. Await never closes it.
func Await(ctx context.Context, events <-chan zk.Event, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-events:
			switch ev.State {
			case zk.StateHasSession:
				go func() {
					for range events {
					}
				}()
				return nil
			case zk.StateAuthFailed:
				return ErrAuthFailed
			}
		case <-timer.C:
			return fmt.Errorf("no session after %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
