package etcdstore

import "github.com/zetcd/zetcd/encoding"

// zxids. etcd's revisions are zetcd's log, but one revision can hold many ZooKeeper writes:
// the committer (commit.go) puts the writes of many sessions in one etcd transaction. A zxid is
// therefore the revision in the high bits and the write's index within the revision in the low
// zxidIndexBits bits; a revision holding one write numbers it 0. Every zxid zetcd hands out is
// made here:
//
//   - a write's zxid, and the czxid, mzxid and pzxid it leaves in Stats: zxidOf(rev, index), the
//     index being stored beside the keys it wrote (values.go) where etcd's metadata cannot hold it;
//   - the zxid of a state read at revision rev (a read's reply, a watch armed by a read, the
//     watch feed's progress): the zxid of the last write of rev, as ZooKeeper answers its
//     lastProcessedZxid (replica.stateZxid: the committer records the index of a batch's last
//     write in the error key's value); zxidAt(rev) where that is not known, which is after
//     every write of rev and before every write of a later revision all the same.
//
// Revisions come back from zxids with revOf (a client's lastZxidSeen, an event's zxid).
const (
	zxidIndexBits = 16
	// maxBatchIndex is the largest index of a write in one revision.
	maxBatchIndex = 1<<zxidIndexBits - 1
)

// zxidOf is the zxid of the write numbered index in revision rev.
func zxidOf(rev int64, index int) encoding.Zxid {
	return encoding.Zxid(rev<<zxidIndexBits | int64(index))
}

// zxidAt is the zxid of the state at revision rev (0 stays 0: nothing seen yet).
func zxidAt(rev int64) encoding.Zxid {
	if rev <= 0 {
		return encoding.Zxid(rev)
	}
	return zxidOf(rev, maxBatchIndex)
}

// revOf is the revision that holds zxid z.
func revOf(z encoding.Zxid) int64 {
	if z <= 0 {
		return int64(z)
	}
	return int64(z) >> zxidIndexBits
}
