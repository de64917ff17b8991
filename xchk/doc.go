// Package xchk is zetcd's cross-check mode: a Handler that runs every request on zetcd and on a
// real ZooKeeper (the oracle), answers the client with one of them, and reports every difference
// in error code, data, children, Stat fields (zxids compared relatively, times ignored) and watch
// events as a structured log line and a metric.
//
// It sits above the zetcd package and below the commands: encoding <- zetcd <- xchk <- cmd/*.
// The implementation arrives with its own issue; this package holds only its contract for now.
package xchk
