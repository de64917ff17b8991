// Package testenv starts the servers zetcd's tests run against — zetcd on an embedded etcd, a
// real Apache ZooKeeper 3.9, and zetcd cross-checked against a real ZooKeeper (xchk) — and
// connects clients to them. Every behaviour test is written once and run against each server in
// Servers.
//
// It is test tooling: only tests and the helpers under internal/testkit import it.
package testenv
