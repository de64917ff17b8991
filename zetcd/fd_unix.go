//go:build unix

package zetcd

import (
	"os"
	"syscall"
)

// fileDescriptors returns the number of open file descriptors of this process and its limit
// (mntr's zk_open_file_descriptor_count and zk_max_file_descriptor_count, which ZooKeeper too
// reports only on Unix).
func fileDescriptors() (open, limit int64, ok bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, false
	}
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		if ents, err := os.ReadDir(dir); err == nil {
			return int64(len(ents)), int64(rl.Cur), true
		}
	}
	return 0, 0, false
}
