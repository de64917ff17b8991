package embedetcd

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
)

// Watcher returns a watcher of this etcd's key space that reads its store's watch streams
// directly. The in-process client's watcher (InProcessClient) passes each event through etcd's
// watch server and the client's stream, dispatch and substream goroutines, four hand-offs
// after the store notifies; this one has one, from the store to the goroutine that forwards its
// responses. It serves what a feed of one prefix needs: a key or range (WithPrefix, WithRange,
// WithFromKey) from a revision (WithRev), and progress on request (RequestProgress); other
// options (filters, previous values, fragmenting, periodic progress) are ignored. Its
// responses carry the store's revision in Header.Revision; a watch whose start revision was
// compacted gets one response with CompactRevision set, then its channel closes, as etcd's.
// The watcher must not outlive the etcd.
func (e *Etcd) Watcher() clientv3.Watcher {
	return &storeWatcher{kv: e.e.Server.Watchable(), streams: map[*storeWatch]struct{}{}}
}

// storeWatcher implements clientv3.Watcher over mvcc watch streams, one per Watch. mu
// protects streams, the watches that have not ended, and closed.
type storeWatcher struct {
	kv      mvcc.WatchableKV
	mu      sync.Mutex
	streams map[*storeWatch]struct{}
	closed  bool
}

// storeWatch is one Watch: its store stream, the id of its one watcher there, and what ends
// it. Its forward goroutine alone closes ws (a stream closed twice panics).
type storeWatch struct {
	ws     mvcc.WatchStream
	id     mvcc.WatchID
	cancel context.CancelFunc
}

// Watch watches key (and its range) from the revision the options name; the channel closes
// when ctx ends, the watcher closes, or the store ends the watch (compaction, shutdown).
func (w *storeWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	out := make(chan clientv3.WatchResponse, 1)
	op := clientv3.OpGet(key, opts...)
	ws := w.kv.NewWatchStream()
	id, err := ws.Watch(ctx, clientv3.AutoWatchID, []byte(key), op.RangeBytes(), op.Rev())
	if err != nil {
		ws.Close()
		out <- clientv3.WatchResponse{Canceled: true, CancelReason: err.Error()}
		close(out)
		return out
	}
	ctx, cancel := context.WithCancel(ctx)
	sw := &storeWatch{ws: ws, id: id, cancel: cancel}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		cancel()
		ws.Close()
		close(out)
		return out
	}
	w.streams[sw] = struct{}{}
	w.mu.Unlock()
	go w.forward(ctx, sw, out)
	return out
}

// forward passes the store's responses to out until the watch ends, then closes both. The
// stream leaves streams before it closes, so RequestProgress never asks a closed one.
func (w *storeWatcher) forward(ctx context.Context, sw *storeWatch, out chan<- clientv3.WatchResponse) {
	defer func() {
		w.mu.Lock()
		delete(w.streams, sw)
		w.mu.Unlock()
		sw.cancel()
		sw.ws.Close()
		close(out)
	}()
	for {
		select {
		case r, ok := <-sw.ws.Chan():
			if !ok {
				return
			}
			resp := clientv3.WatchResponse{
				Header:          &pb.ResponseHeader{Revision: r.Revision},
				Events:          r.Events,
				CompactRevision: r.CompactRevision,
				Canceled:        r.CompactRevision != 0,
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
			if resp.Canceled {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// RequestProgress asks every watch that has caught up with the store for a response without
// events at the store's revision.
func (w *storeWatcher) RequestProgress(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for sw := range w.streams {
		sw.ws.RequestProgress(sw.id)
	}
	return ctx.Err()
}

// Close ends every watch; their channels close.
func (w *storeWatcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for sw := range w.streams {
		sw.cancel()
	}
	return nil
}
