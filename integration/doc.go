// Package integration holds zetcd's end-to-end tests: real clients over real sockets against
// zetcd on an embedded etcd and, with the same expectations, against a real Apache ZooKeeper 3.9
// (internal/testkit/zkserver). It has no non-test code.
package integration
