package zetcd

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// fourLetterCommands maps each four-letter word zetcd answers to the function producing its
// output (PROTOCOL.md §9). Every other word encoding.FourLetterWord recognises is answered as
// ZooKeeper answers a command outside its whitelist. Adding a command means adding a row.
var fourLetterCommands = map[string]func(*Server) string{
	"ruok": func(*Server) string { return "imok" },
	"isro": func(*Server) string { return "rw" }, // zetcd is never read-only
	"srvr": (*Server).srvr,
}

// fourLetterWord answers cmd, read in place of the first frame length; the connection is
// closed afterwards.
func (c *clientConn) fourLetterWord(cmd string) {
	var out string
	if f, ok := fourLetterCommands[cmd]; ok {
		out = f(c.s)
	} else {
		out = cmd + " is not executed because it is not in the whitelist.\n"
	}
	c.log.Debug("four-letter word", zap.String("command", cmd))
	if !c.armWrite(handshakeTimeout) {
		return
	}
	if _, err := io.WriteString(c.nc, out); err != nil {
		c.log.Info("write four-letter word answer failed", zap.Error(fmt.Errorf("4lw %s: write: %w", cmd, err)))
		return
	}
	c.graceful.Store(true)
}

// srvr formats the srvr output as ZooKeeper 3.9 does.
func (s *Server) srvr() string {
	minMs, avgMs, maxMs := s.stats.latency()
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: %s\n", s.cfg.Version)
	fmt.Fprintf(&b, "Latency min/avg/max: %d/%s/%d\n", minMs, javaDouble(avgMs), maxMs)
	fmt.Fprintf(&b, "Received: %d\n", s.stats.received.Load())
	fmt.Fprintf(&b, "Sent: %d\n", s.stats.sent.Load())
	fmt.Fprintf(&b, "Connections: %d\n", s.numConnections())
	fmt.Fprintf(&b, "Outstanding: %d\n", s.stats.outstanding.Load())
	fmt.Fprintf(&b, "Zxid: 0x%s\n", strconv.FormatUint(uint64(s.stats.maxZxid.Load()), 16))
	b.WriteString("Mode: standalone\n")
	b.WriteString("Node count: 0\n") // TODO: ask the backend once it can count znodes cheaply
	return b.String()
}

// javaDouble formats v as Java's Double.toString does for the values srvr prints: always with
// a fractional part ("0.0", "12.5").
func javaDouble(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}
