package zetcd

import (
	"errors"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// SASL authentication and enforced authentication, in the front as ZooKeeper has them in
// ZooKeeperServer.processPacket, before any request reaches the pipeline:
//
//   - The sasl request (102) is one step of the connection's SASL exchange. Its reply has zxid
//     0 and the server's token; when the exchange completes, the connection holds
//     sasl:<principal> (and super: for the SASL super user) from the next request on. A failed
//     step is answered with AuthFailed (SessionClosedRequireSaslAuth when SASL is required) and
//     a null token, and the connection is closed; the session survives, for the client to
//     resume.
//   - With enforced schemes, every other request (pings and closeSession included) of a
//     connection that holds no identity of those schemes is answered with
//     SessionClosedRequireSaslAuth, and the connection is closed.
//
// Each connection authenticates on its own: a client that resumes its session, here or on
// another zetcd, authenticates again on the new connection (the ZooKeeper clients do so), as it
// replays its auth packets.

// SASLServer is the server side of one connection's SASL exchange, as ZooKeeper's
// javax.security.sasl.SaslServer: Step takes the client's tokens in turn and returns the
// server's answer to each. An error fails the authentication; if it has a method
// Unanswered() bool that reports true, ZooKeeper would close the connection without a reply
// (its mechanism threw a runtime exception rather than a SaslException), and so does the
// server.
type SASLServer interface {
	Step(token []byte) ([]byte, error)
	Complete() bool
	// AuthorizationID is the principal the client authenticated as, once Complete.
	AuthorizationID() string
}

// AuthConfig configures SASL and enforced authentication. The zero value is ZooKeeper's
// default: no SASL (a sasl request goes to Handler.Sasl) and nothing enforced.
type AuthConfig struct {
	// NewSASLServer, if set, turns SASL on: it returns the server side of a new connection's
	// exchange, called at the connection's first sasl request (ZooKeeper's JAAS Server section).
	NewSASLServer func() SASLServer
	// SASLSuperUser is zookeeper.superUser: a connection that authenticates by SASL as this
	// principal also holds super:, which passes every ACL check. Empty: none.
	SASLSuperUser string
	// EnforceSchemes are zookeeper.enforce.auth.schemes with zookeeper.enforce.auth.enabled
	// (["sasl"] is zookeeper.sessionRequireClientSASLAuth): when not empty, a connection must
	// hold an identity of one of them before any request other than auth and sasl.
	EnforceSchemes []string
	// AllowSASLFailedClients is zookeeper.allowSaslFailedClients: a failed SASL step is
	// answered with err 0 and a null token and the connection stays open, unacknowledged,
	// unless SASL is required (EnforceSchemes holds "sasl").
	AllowSASLFailedClients bool
}

// saslRequired is AuthenticationHelper.isSaslAuthRequired.
func (a *AuthConfig) saslRequired() bool { return slices.Contains(a.EnforceSchemes, "sasl") }

// connAuth is the front's view of one connection's authentication.
type connAuth struct {
	// sasl is the connection's exchange, created at its first sasl request; executor only.
	sasl SASLServer
	// schemes are the schemes of the identities the connection holds, for enforcement
	// (AuthConfig.EnforceSchemes); executor only.
	schemes []string
	// enforced is set once the connection holds an identity of an enforced scheme; the
	// reader reads it to answer pings at once again.
	enforced atomic.Bool
}

// holdScheme records that the connection holds an identity of scheme. Executor only (and
// runSession before the executor starts).
func (c *clientConn) holdScheme(scheme string) {
	if slices.Contains(c.auth.schemes, scheme) {
		return
	}
	c.auth.schemes = append(c.auth.schemes, scheme)
	if slices.Contains(c.s.cfg.Auth.EnforceSchemes, scheme) {
		c.auth.enforced.Store(true)
	}
}

// startAuth records the identities the connection holds from the start: ip:<address>, and the
// transport's (x509). Called by runSession before the executor starts.
func (c *clientConn) startAuth(transport []encoding.ID) {
	c.holdScheme("ip")
	for _, id := range transport {
		c.holdScheme(id.Scheme)
	}
}

// pingAtOnce reports whether the reader may answer a ping itself: always, unless a ping would
// be refused for want of authentication, which the executor decides in order with the sasl
// and auth requests before it.
func (c *clientConn) pingAtOnce() bool {
	return len(c.s.cfg.Auth.EnforceSchemes) == 0 || c.auth.enforced.Load()
}

// refuseUnauthenticated answers r with SessionClosedRequireSaslAuth and closes the connection
// when authentication is enforced and the connection holds no identity of an enforced scheme
// (AuthenticationHelper.enforceAuthentication). It reports whether it did.
func (c *clientConn) refuseUnauthenticated(r *pendingRequest) bool {
	if len(c.s.cfg.Auth.EnforceSchemes) == 0 || c.auth.enforced.Load() {
		return false
	}
	if op := r.hdr.Op; op == encoding.OpAuth || op == encoding.OpSasl {
		return false
	}
	c.log.Warn("client holds no identity of an enforced authentication scheme; closing the connection",
		zap.Strings("schemes", c.auth.schemes), zap.Strings("enforced", c.s.cfg.Auth.EnforceSchemes), zap.Stringer("op", r.hdr.Op))
	c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: r.hdr.Xid, Err: encoding.ErrSessionClosedRequireSaslAuth}, exactZxid: true, closeAfter: true})
	return true
}

// saslStep runs one step of the connection's SASL exchange and queues its answer. It reports
// false when the connection is to be closed.
func (c *clientConn) saslStep(r *pendingRequest) bool {
	cfg := &c.s.cfg.Auth
	xid := r.hdr.Xid
	req, _ := r.body.(*encoding.GetSASLRequest)
	if req == nil || req.Token == nil {
		// ZooKeeper takes the length of the token before anything else, and a null one makes
		// it drop the connection.
		c.log.Info("sasl request with a null token; closing the connection")
		c.observeRequest(r, 0, nil)
		c.queue(outFrame{noFrame: true, closeAfter: true})
		return false
	}
	if c.auth.sasl == nil {
		c.auth.sasl = cfg.NewSASLServer()
	}
	token, err := c.auth.sasl.Step(req.Token)
	if err != nil {
		return c.saslFailed(r, err)
	}
	if c.auth.sasl.Complete() {
		id := c.auth.sasl.AuthorizationID()
		ids := []encoding.ID{{Scheme: "sasl", ID: id}}
		if cfg.SASLSuperUser != "" && id == cfg.SASLSuperUser {
			ids = append(ids, encoding.ID{Scheme: "super", ID: ""})
		}
		c.sess.AddAuthIDs(ids)
		for _, id := range ids {
			c.holdScheme(id.Scheme)
		}
		c.log.Info("SASL authentication succeeded", zap.String("authorizationID", id))
	}
	c.observeRequest(r, 0, nil)
	c.reply(outFrame{hdr: encoding.ReplyHeader{Xid: xid}, body: &encoding.SetSASLResponse{Token: token}, exactZxid: true})
	return true
}

// saslFailed answers a failed SASL step as ZooKeeper's processSasl does.
func (c *clientConn) saslFailed(r *pendingRequest, err error) bool {
	cfg := &c.s.cfg.Auth
	var u interface{ Unanswered() bool }
	if errors.As(err, &u) && u.Unanswered() {
		c.log.Warn("SASL authentication failed; closing the connection without a reply", zap.Error(err))
		c.observeRequest(r, 0, err)
		c.queue(outFrame{noFrame: true, closeAfter: true})
		return false
	}
	c.observeRequest(r, 0, encoding.ErrAuthFailed)
	if cfg.AllowSASLFailedClients && !cfg.saslRequired() {
		c.log.Warn("SASL authentication failed; keeping the connection (allowSaslFailedClients)", zap.Error(err))
		c.reply(outFrame{hdr: encoding.ReplyHeader{Xid: r.hdr.Xid}, body: &encoding.SetSASLResponse{}, exactZxid: true})
		return true
	}
	code := encoding.ErrAuthFailed
	if cfg.saslRequired() {
		code = encoding.ErrSessionClosedRequireSaslAuth
	}
	c.log.Warn("SASL authentication failed; closing the connection", zap.Error(err), zap.Stringer("code", code))
	c.reply(outFrame{hdr: encoding.ReplyHeader{Xid: r.hdr.Xid, Err: code}, body: &encoding.SetSASLResponse{}, exactZxid: true, closeAfter: true})
	return false
}
