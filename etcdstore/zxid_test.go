package etcdstore

import "testing"

// TestZxids: a write's zxid is after the state before its revision and within the state at it;
// revOf inverts both.
func TestZxids(t *testing.T) {
	for _, rev := range []int64{1, 2, 1 << 40} {
		if zxidAt(rev-1) >= zxidOf(rev, 0) || zxidOf(rev, 0) >= zxidOf(rev, 1) || zxidOf(rev, maxBatchIndex) > zxidAt(rev) {
			t.Errorf("revision %d: zxids out of order: %v %v %v %v", rev, zxidAt(rev-1), zxidOf(rev, 0), zxidOf(rev, 1), zxidAt(rev))
		}
		if revOf(zxidOf(rev, 9)) != rev || revOf(zxidAt(rev)) != rev {
			t.Errorf("revOf does not invert the zxids of revision %d", rev)
		}
	}
	if zxidAt(0) != 0 || revOf(0) != 0 {
		t.Error("zxid 0 is not revision 0")
	}
}
