package etcdstore

import (
	"bytes"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// TestKeysRoundTrip: every key that is parsed back names what it was built from, and keys of
// other kinds or other prefixes are refused.
func TestKeysRoundTrip(t *testing.T) {
	k := keySchema{prefix: "/zk/"}
	for _, path := range []string{"/", "/a", "/a/b", "/zookeeper/config", "/x/y/z-0000000007"} {
		if got, ok := k.pathOfDataKey(k.data(path)); !ok || got != path {
			t.Errorf("pathOfDataKey(data(%q)) = %q, %v", path, got, ok)
		}
		for name, key := range map[byte]string{'a': k.acl(path), 'c': k.childCreates(path), 'd': k.childDeletes(path), 'o': k.offsets(path)} {
			if got, gotName, ok := k.pathOfMetaKey(key); !ok || got != path || gotName != name {
				t.Errorf("pathOfMetaKey(%q) = %q, %q, %v; want %q, %q", key, got, gotName, ok, path, name)
			}
		}
		if _, _, ok := k.pathOfMetaKey(k.data(path)); ok {
			t.Errorf("a data key parsed as a meta key: %q", k.data(path))
		}
		if got, ok := k.pathOfReapIndex(k.reapIndex(path)); path != "/" && (!ok || got != path) {
			t.Errorf("pathOfReapIndex(reapIndex(%q)) = %q, %v", path, got, ok)
		}
		if _, ok := k.pathOfDataKey(k.acl(path)); ok {
			t.Errorf("an ACL key parsed as a data key: %q", k.acl(path))
		}
		if _, ok := (keySchema{prefix: "/other/"}).pathOfDataKey(k.data(path)); ok {
			t.Errorf("a data key under another prefix parsed: %q", k.data(path))
		}
	}
	// The children of a path are exactly the keys under its children prefix, one level down.
	if c := k.childrenPrefix("/a"); !bytes.HasPrefix([]byte(k.data("/a/b")), []byte(c)) || bytes.HasPrefix([]byte(k.data("/a/b/c")), []byte(c)) {
		t.Errorf("childrenPrefix(/a) = %q", c)
	}
	for _, id := range []encoding.SessionID{1, 0x7fffffffffffffff, 0x1234abcd} {
		if got, ok := k.sessionOfKey(k.session(id)); !ok || got != id {
			t.Errorf("sessionOfKey(session(%x)) = %x, %v", id, got, ok)
		}
	}
	for _, id := range []uint64{1, 1<<64 - 1} {
		if got, ok := k.processOfKey(k.process(id)); !ok || got != id {
			t.Errorf("processOfKey(process(%x)) = %x, %v", id, got, ok)
		}
	}
}
