package zksession

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestAwait(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		states []zk.State
		want   func(error) bool
	}{
		{"session", context.Background(), []zk.State{zk.StateConnecting, zk.StateConnected, zk.StateHasSession}, func(err error) bool { return err == nil }},
		{"auth failed", context.Background(), []zk.State{zk.StateConnected, zk.StateAuthFailed}, func(err error) bool { return errors.Is(err, ErrAuthFailed) }},
		{"timeout", context.Background(), []zk.State{zk.StateConnecting}, func(err error) bool { return err != nil && err.Error() == "no session after 10ms" }},
		{"cancelled", cancelled, nil, func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := make(chan zk.Event, len(tc.states))
			for _, s := range tc.states {
				events <- zk.Event{Type: zk.EventSession, State: s}
			}
			if err := Await(tc.ctx, events, 10*time.Millisecond); !tc.want(err) {
				t.Fatalf("Await: %v", err)
			}
			close(events) // ends the drain goroutine after a session
		})
	}
}

// TestAwaitDrains: after the session, later events are read, so go-zookeeper never blocks on a
// full channel.
func TestAwaitDrains(t *testing.T) {
	events := make(chan zk.Event) // unbuffered: each send waits for a reader
	go func() { events <- zk.Event{Type: zk.EventSession, State: zk.StateHasSession} }()
	if err := Await(context.Background(), events, time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		select {
		case events <- zk.Event{Type: zk.EventSession, State: zk.StateDisconnected}:
		case <-time.After(10 * time.Second):
			t.Fatal("events are not drained after the session")
		}
	}
	close(events)
}
