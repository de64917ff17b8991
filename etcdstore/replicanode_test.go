package etcdstore

import (
	"reflect"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/zetcd/zetcd/encoding"
)

// TestReplicaNodeKeys: a replicaNode changed key by key holds exactly the nodeKeys the same
// changes make (null and empty data told apart, a TTL, an ACL key, the meta keys, a corrupt
// value, a create mode out of range), and keeps no byte of the etcd values it was given.
func TestReplicaNodeKeys(t *testing.T) {
	digest := []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "digest", ID: "u:x"}}}
	kv := func(value string, create, mod, version, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Value: []byte(value), CreateRevision: create, ModRevision: mod, Version: version, Lease: lease}
	}
	type change struct {
		name byte // dataKeyName or a meta key's name
		kv   *mvccpb.KeyValue
		del  bool
	}
	steps := []change{
		{name: dataKeyName, kv: kv(encodeDataValue([]byte("abc"), 7, zxidIndexes{czxid: 1, mzxid: 2}, aclValue{Ctime: 5, ACL: openACL}), 3, 3, 1, 0)},
		{name: 'c', kv: kv(encodeIndexValue(4), 4, 9, 3, 0)},
		{name: dataKeyName, kv: kv(encodeDataValue(nil, 8, zxidIndexes{}, aclValue{Ctime: 5, ACL: openACL}), 3, 10, 2, 0)},
		{name: 'a', kv: kv(encodeACLValue(aclValue{Ctime: 5, ACL: digest}), 11, 11, 1, 0)},
		{name: dataKeyName, kv: kv(encodeDataValue([]byte{}, 9, zxidIndexes{}, aclValue{Ctime: 5, ACL: openACL}), 3, 12, 3, 0)},
		{name: 's', kv: kv("count=1", 13, 13, 1, 0)},
		{name: 'o', kv: kv(encodeOffsetsValue(offsetsValue{Version: 1, Creates: 2}), 14, 14, 1, 0)},
		{name: 'd', kv: kv("corrupt", 15, 15, 1, 0)},
		{name: 'd', del: true},
		{name: 's', del: true},
		{name: dataKeyName, kv: kv(encodeDataValue([]byte("ttl"), 9, zxidIndexes{}, aclValue{Ctime: 6, Mode: encoding.ModePersistentWithTTL, TTL: 1000, ACL: openACL}), 3, 16, 4, 0)},
		{name: 'a', del: true},
		{name: dataKeyName, kv: kv(encodeDataValue([]byte("eph"), 9, zxidIndexes{}, aclValue{Ctime: 6, Mode: encoding.ModeEphemeral, ACL: openACL}), 17, 17, 1, 99)},
		{name: dataKeyName, del: true},
	}
	var acls aclTable
	var want nodeKeys
	var n replicaNode
	for i, c := range steps {
		var own *mvccpb.KeyValue // want's copy: c.kv is overwritten once n has it
		if c.kv != nil {
			own = &mvccpb.KeyValue{Value: append([]byte(nil), c.kv.Value...), CreateRevision: c.kv.CreateRevision,
				ModRevision: c.kv.ModRevision, Version: c.kv.Version, Lease: c.kv.Lease}
		}
		switch {
		case c.name == dataKeyName && c.del:
			want.deleteData()
			n.deleteData()
		case c.name == dataKeyName:
			want.putData(own, &acls)
			n.putData(c.kv, &acls)
		case c.del:
			want.deleteMeta(c.name)
			n.deleteMeta(c.name)
		default:
			want.putMeta(c.name, own, &acls)
			n.putMeta(c.name, c.kv, &acls)
		}
		if c.kv != nil {
			for j := range c.kv.Value {
				c.kv.Value[j] = 0xff // etcd's buffers are not the replica's
			}
		}
		got, wanted := n.keys(), want
		if err := wanted.decodeErr(); err != nil {
			if got.decodeErr() == nil {
				t.Fatalf("step %d: the node lost the error %v", i, err)
			}
			gm, wm := *got.more, *wanted.more // errors differ in identity only
			gm.err, wm.err = nil, nil
			got.more, wanted.more = &gm, &wm
		}
		if !reflect.DeepEqual(got, wanted) {
			t.Fatalf("step %d (%c): the node holds\n%+v\nwant\n%+v", i, c.name, got, wanted)
		}
		if n.empty() != want.empty() || n.exists() != want.exists() {
			t.Fatalf("step %d: empty %v, exists %v; want %v, %v", i, n.empty(), n.exists(), want.empty(), want.exists())
		}
		if (got.value == nil) != (wanted.value == nil) {
			t.Fatalf("step %d: null data is %v, want %v", i, got.value == nil, wanted.value == nil)
		}
	}
	// A create mode no znode has does not fit the node's field: the node fails its reads.
	n.putData(kv(encodeDataValue([]byte("m"), 9, zxidIndexes{}, aclValue{Mode: 1 << 20, ACL: openACL}), 20, 20, 1, 0), &acls)
	if got := n.keys(); got.decodeErr() != errCorruptMode {
		t.Errorf("a node with create mode 1<<20 reads with error %v, want %v", got.decodeErr(), errCorruptMode)
	}
}
