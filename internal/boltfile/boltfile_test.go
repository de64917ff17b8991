package boltfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

type kv struct{ k, v []byte }

// testBuckets are buckets of every shape: many keys of mixed sizes with values spanning
// overflow pages, a few keys, none, and one key.
func testBuckets(n int) map[string][]kv {
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]kv, 0, n)
	for i := 0; i < n; i++ {
		k := binary.BigEndian.AppendUint64([]byte("r"), uint64(i)*3)
		size := r.IntN(300)
		switch {
		case i%9973 == 0:
			size = 70000 // past a page's count of bytes many times over
		case i%1009 == 0:
			size = 5000
		}
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(r.IntN(256))
		}
		big = append(big, kv{k, v})
	}
	return map[string][]kv{
		"key":                      big,
		"lease":                    {{[]byte("\x00\x00\x01"), []byte("a")}, {[]byte("\x00\x00\x02"), nil}, {[]byte("\x00\x01"), []byte("c")}},
		"empty":                    nil,
		"meta":                     {{[]byte("storageVersion"), []byte("3.7.0")}},
		strings.Repeat("long", 20): {{[]byte(strings.Repeat("k", 3000)), []byte(strings.Repeat("v", 3000))}},
	}
}

func writeFile(t *testing.T, path string, buckets map[string][]kv) {
	t.Helper()
	w, err := Create(path, os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	// Buckets go in an order that is not their names'.
	names := make([]string, 0, len(buckets))
	for name := range buckets {
		names = append(names, name)
	}
	slices.Sort(names)
	slices.Reverse(names)
	for _, name := range names {
		if err := w.Bucket([]byte(name)); err != nil {
			t.Fatal(err)
		}
		for _, e := range buckets[name] {
			if err := w.Put(e.k, e.v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func check(t *testing.T, db *bolt.DB) {
	t.Helper()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt's check: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, db *bolt.DB, want map[string][]kv) {
	t.Helper()
	err := db.View(func(tx *bolt.Tx) error {
		var got []string
		if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			got = append(got, string(name))
			exp := want[string(name)]
			i := 0
			err := b.ForEach(func(k, v []byte) error {
				if i >= len(exp) || !bytes.Equal(k, exp[i].k) || !bytes.Equal(v, exp[i].v) {
					return fmt.Errorf("bucket %q: entry %d is %q (%d bytes), not the one written", name, i, k, len(v))
				}
				i++
				return nil
			})
			if err == nil && i != len(exp) {
				err = fmt.Errorf("bucket %q: %d entries read, %d written", name, i, len(exp))
			}
			return err
		}); err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("buckets %q, want %d", got, len(want))
		}
		// Lookups go through the branch pages.
		for name, exp := range want {
			b := tx.Bucket([]byte(name))
			for i := 0; i < len(exp); i += 1 + len(exp)/500 {
				if v := b.Get(exp[i].k); !bytes.Equal(v, exp[i].v) {
					return fmt.Errorf("bucket %q: Get(%q) = %d bytes, want %d", name, exp[i].k, len(v), len(exp[i].v))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriterReadByBbolt writes buckets of every shape and has bbolt open, check, read, change,
// and read them again.
func TestWriterReadByBbolt(t *testing.T) {
	for _, n := range []int{0, 1, 200, 100000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			want := testBuckets(n)
			writeFile(t, path, want)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			check(t, db)
			compare(t, db, want)

			// bbolt changes the tree: puts between the keys, after them, a delete of every
			// other key; the freelist holds what it frees.
			err = db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("key"))
				for i := 0; i < len(want["key"]); i += 2 {
					if err := b.Delete(want["key"][i].k); err != nil {
						return err
					}
				}
				for i := 0; i < 2000; i++ {
					if err := b.Put(binary.BigEndian.AppendUint64([]byte("r"), uint64(i)*3+1), []byte("new")); err != nil {
						return err
					}
				}
				_, err := tx.CreateBucket([]byte("added"))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			check(t, db)
			err = db.View(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("key"))
				got := b.Stats().KeyN
				if exp := len(want["key"]) - (len(want["key"])+1)/2 + 2000; got != exp {
					return fmt.Errorf("%d keys after the change, want %d", got, exp)
				}
				if tx.Bucket([]byte("added")) == nil {
					return fmt.Errorf("the bucket added is missing")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWriterRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(filepath.Join(dir, "db"), 1000); err == nil {
		t.Error("a page size of 1000 was accepted")
	}
	w, err := Create(filepath.Join(dir, "db"), os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put([]byte("a"), nil); err == nil || !strings.Contains(err.Error(), "outside a bucket") {
		t.Errorf("a put outside a bucket: %v", err)
	}
	if _, err := Create(filepath.Join(dir, "db"), os.Getpagesize()); err == nil {
		t.Error("an existing file was overwritten")
	}
	w.Close()

	w, err = Create(filepath.Join(dir, "db2"), os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Bucket([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := w.Put([]byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Put([]byte("a"), nil); err == nil || !strings.Contains(err.Error(), `key "a" does not follow key "b"`) {
		t.Errorf("a key out of order: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("a writer that failed closed without an error")
	}

	w, err = Create(filepath.Join(dir, "db3"), os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	w.Bucket([]byte("b"))
	if err := w.Bucket([]byte("b")); err == nil || !strings.Contains(err.Error(), "written already") {
		t.Errorf("a bucket written twice: %v", err)
	}
	w.Close()
}
