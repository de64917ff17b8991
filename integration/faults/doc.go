// Package faults holds zetcd's fault tests: a multi-member etcd cluster and zetcd processes,
// each a real process, whose members are killed, paused (SIGSTOP), frozen, cut off from each
// other or from zetcd, or lose their quorum, while clients keep working through zetcd; and the
// linearizability checks (porcupine) of histories recorded under such faults. It has no
// non-test code.
package faults
