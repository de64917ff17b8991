// Package gomaxprocs adapts the process's GOMAXPROCS to its load: one P while the process
// uses little CPU, the runtime's default (every core it may use) once it uses more.
//
// Why: at low load a request crosses many goroutines (zetcd's reader, executor and writer;
// etcd's proposal, raft, log and apply loops), and each goroutine readied while a P is idle
// makes the runtime wake another thread, which spins looking for work and often runs the
// goroutine on another, idle and cold, CPU. With one P the readied goroutine runs next on the
// same thread as soon as the current one blocks. Measured on 2 cores (docs/benchmarks.md): the
// watch event latency's median falls from 0.40 to 0.35 ms and zetcd's CPU per event by a
// fifth. Under load one P caps throughput (creates at 16 connections: a fifth fewer), so the
// process goes back to every core as soon as it uses more than Policy.UpCores of CPU.
//
// The operator's choice stands: nothing is adapted when the GOMAXPROCS environment variable sets
// a number of Ps, or when the runtime's default is one P anyway.
package gomaxprocs
