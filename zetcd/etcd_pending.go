package zetcd

import (
	"context"

	"github.com/zetcd/zetcd/encoding"
)

// Operations whose etcd implementation has not landed yet. Each answers Unimplemented (and the
// connection stays open); its issue replaces it with the real implementation and deletes it here.

func (s *etcdSession) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	return s.zxid(0), encoding.ErrUnimplemented
}
