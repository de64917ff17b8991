package zetcd

import (
	"context"

	"github.com/zetcd/zetcd/encoding"
)

// Operations whose etcd implementation has not landed yet. Each answers Unimplemented (and the
// connection stays open); its issue replaces it with the real implementation and deletes it here.

func (s *etcdSession) CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	return s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	return nil, s.zxid(0), encoding.ErrUnimplemented
}

func (s *etcdSession) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	return s.zxid(0), encoding.ErrUnimplemented
}
