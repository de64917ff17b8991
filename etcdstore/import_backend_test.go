package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/zetcd/zetcd/internal/embedetcd"
)

// TestEncodeKeyValue: the KeyValue the import writes into etcd's database is what etcd itself
// would marshal.
func TestEncodeKeyValue(t *testing.T) {
	for _, c := range []struct {
		p                          importPut
		created, modified, version int64
	}{
		{importPut{key: "/n/a", value: "data", lease: 0x7fff_0000_0001}, 2, 9, 1},
		{importPut{key: "/n/a", value: ""}, 3, 3, 1},
		{importPut{key: "/i"}, 0, 0, 0}, // a tombstone's
		{importPut{key: "/k", value: string(make([]byte, 300))}, 1 << 40, 1 << 40, 2},
	} {
		want, err := proto.Marshal(&mvccpb.KeyValue{Key: []byte(c.p.key), Value: []byte(c.p.value),
			CreateRevision: c.created, ModRevision: c.modified, Version: c.version, Lease: c.p.lease})
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeKeyValue(nil, []byte(c.p.key), []byte(c.p.value), c.p.lease, c.created, c.modified, c.version); !bytes.Equal(got, want) {
			t.Errorf("%+v: encoded %x, proto.Marshal %x", c, got, want)
		}
	}
}

// TestImportBackendCutShort: a database the import wrote without its final revision, as a
// killed import leaves it, holds the import marker: etcd starts on it, zetcd refuses it.
func TestImportBackendCutShort(t *testing.T) {
	dir := t.TempDir()
	if err := embedetcd.PrepareBackend(dir); err != nil {
		t.Fatal(err)
	}
	keys := keySchema{prefix: "/zk/"}
	w, err := newBackendWriter(zaptest.NewLogger(t), embedetcd.BackendPath(dir), importPut{key: keys.importMarker(), value: "import"}, backendFirstRev)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.begin(backendFirstRev + 5); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < backendChunkEntries+10; i++ { // more than a chunk: the writer's goroutine at work
		w.put(importPut{key: keys.prefix + "x/" + string(rune('a'+i%26)), value: "v"})
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	e, err := embedetcd.Start(embedetcd.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), keys.importMarker())
	if err != nil || len(resp.Kvs) != 1 || resp.Header.Revision != backendFirstRev+5 {
		t.Fatalf("etcd on the cut-short database: %v %+v", err, resp)
	}
	_, err = New(context.Background(), Config{Client: cli, Prefix: "/zk/", ReapInterval: -1})
	if !errors.Is(err, errImportUnfinished) {
		t.Errorf("New on a cut-short import: %v", err)
	}
}
