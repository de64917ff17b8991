package main

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// errHeld is what a connQueue's accept answers once the relaying stops.
var errHeld = errors.New("relaying stopped")

// connQueue accepts a client port's connections and hands them to whoever serves them: the
// relay before the cutover, zetcd's server after it (as its net.Listener). Between the two they
// wait in it, accepted and not read: their clients see a connection that has not answered yet.
type connQueue struct {
	ln        net.Listener
	tls       bool
	conns     chan net.Conn
	failed    chan struct{} // closed when accepting failed, with err
	err       error
	closed    chan struct{}
	closeOnce sync.Once
}

func newConnQueue(p clientPort) *connQueue {
	q := &connQueue{ln: p.ln, tls: p.tls, conns: make(chan net.Conn), failed: make(chan struct{}), closed: make(chan struct{})}
	go q.run()
	return q
}

func (q *connQueue) run() {
	for {
		c, err := q.ln.Accept()
		if err != nil {
			q.err = err
			close(q.failed)
			return
		}
		select {
		case q.conns <- c:
		case <-q.closed:
			c.Close()
			return
		}
	}
}

// accept returns the next connection, or errHeld once stop is closed.
func (q *connQueue) accept(stop <-chan struct{}) (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.failed:
		if errors.Is(q.err, net.ErrClosed) {
			return nil, net.ErrClosed
		}
		return nil, fmt.Errorf("serve %s: %w", q.ln.Addr(), q.err)
	case <-q.closed:
		return nil, net.ErrClosed
	case <-stop:
		return nil, errHeld
	}
}

func (q *connQueue) Accept() (net.Conn, error) { return q.accept(nil) }

func (q *connQueue) Close() error {
	q.closeOnce.Do(func() { close(q.closed) })
	return q.ln.Close()
}

func (q *connQueue) Addr() net.Addr { return q.ln.Addr() }
