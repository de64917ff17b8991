//go:build !unix

package zetcd

// fileDescriptors is unavailable off Unix; mntr then omits the descriptor lines, as ZooKeeper
// does.
func fileDescriptors() (open, limit int64, ok bool) { return 0, 0, false }
