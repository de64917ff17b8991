// Package tcpproxy is a TCP proxy for tests that stand a network fault between a client and a
// server: frozen, it forwards nothing in either direction and keeps every connection open,
// accepting new ones, as the kernel does for a process stopped with SIGSTOP or a partition that
// keeps TCP connections up; reset, it closes every connection it forwards, as a network that
// drops them.
//
// It is test tooling, imported only by tests.
package tcpproxy
