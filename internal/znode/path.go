package znode

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidatePath reports whether path is a valid znode path by ZooKeeper's PathUtils.validatePath.
// Java checks UTF-16 code units; in Go every rune above U+FFFF (a surrogate pair in Java) is
// rejected, and invalid UTF-8 decodes to U+FFFD, which is rejected too.
func ValidatePath(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	if path == "/" {
		return true
	}
	if path[len(path)-1] == '/' {
		return false
	}
	for seg := range strings.SplitSeq(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	for _, r := range path {
		switch {
		case r == 0,
			r > 0 && r <= 0x1f,
			r >= 0x7f && r <= 0x9f,
			r >= 0xd800 && r <= 0xf8ff,
			r >= 0xfff0,
			r == utf8.RuneError:
			return false
		}
	}
	return true
}

// NormalizeRead maps ZooKeeper's alias "" for the root onto "/".
func NormalizeRead(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// Parent returns the parent of a path as ZooKeeper computes it: the text before the last '/',
// with "" (the root's alias) mapped to "/". ok is false when the path has no '/'.
func Parent(path string) (parent string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", false
	}
	if i == 0 {
		return "/", true
	}
	return path[:i], true
}

// SystemPaths are the nodes every ZooKeeper server has. They report all-zero zxids and times
// until changed, and cannot be deleted.
var SystemPaths = []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"}

func IsSystem(path string) bool {
	switch path {
	case "/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config":
		return true
	}
	return false
}

// SequentialName appends ZooKeeper's sequence suffix: the parent's create counter formatted
// "%010d" as a signed int32 (after 2147483647 comes -2147483648).
func SequentialName(path string, counter int64) string {
	return fmt.Sprintf("%s%010d", path, int32(counter))
}
