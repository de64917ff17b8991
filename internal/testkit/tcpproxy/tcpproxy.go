package tcpproxy

import (
	"net"
	"sync"
)

// Proxy forwards the connections made to Addr to its target. Its methods may be called from any
// goroutine.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	thawed chan struct{}         // closed while the proxy forwards
	conns  map[net.Conn]struct{} // both ends of every connection forwarded and not yet closed
}

// Start listens on a free loopback port and forwards what it accepts to target (host:port),
// until Close.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, thawed: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	close(p.thawed)
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting and lets what is held go; connections forwarded so far stay up until
// either end closes them.
func (p *Proxy) Close() error {
	p.Thaw()
	return p.ln.Close()
}

// Freeze stops forwarding: bytes read from either side are held until Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // frozen already
	}
}

// Thaw forwards again, what was held first.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// Reset closes every connection forwarded so far, both ends, as a connection the network
// drops; the proxy goes on accepting new ones.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// track adds c to the connections Reset closes.
func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// gate returns a channel that is closed once the proxy forwards.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.track(c)
			p.track(up)
			go p.copy(up, c)
			p.copy(c, up)
		}()
	}
}

// copy forwards src to dst while the proxy is not frozen, then closes both.
func (p *Proxy) copy(dst, src net.Conn) {
	defer p.untrack(dst)
	defer p.untrack(src)
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
