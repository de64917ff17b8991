// Package sasl is the server side of SASL authentication as ZooKeeper 3.9 performs it over its
// sasl request (opcode 102): the DIGEST-MD5 mechanism (RFC 2831) with the behaviour of the JDK's
// DigestMD5Server as ZooKeeper configures it (protocol "zookeeper", server name and realm
// "zk-sasl-md5", qop "auth" only, UTF-8), the JAAS configuration file operators already write
// for ZooKeeper (a Server section of DigestLoginModule with user_<name>="<password>" options),
// and ZooKeeper's canonicalisation of the authenticated name (KerberosName with the DEFAULT
// rule, zookeeper.kerberos.removeHostFromPrincipal and removeRealmFromPrincipal).
//
// It knows bytes and names, not connections: the ZooKeeper front (package zetcd) runs one
// DigestMD5 per connection and turns a completed exchange into the identity sasl:<id>. It
// imports only the standard library.
//
// The exchange, as the ZooKeeper Java client drives it:
//
//	client                                   server
//	sasl{token: ""}                 ──────▶   (any first token is ignored)
//	                                ◀──────   realm="zk-sasl-md5",nonce="…",charset=utf-8,algorithm=md5-sess
//	sasl{token: username=…,realm=…,
//	  nonce=…,cnonce=…,nc=00000001,
//	  qop=auth,digest-uri="zookeeper/zk-sasl-md5",
//	  response=<32 hex>,charset=utf-8} ──────▶ checks response against the user's password
//	                                ◀──────   rspauth=<32 hex>   (complete: identity sasl:<id>)
//
// Any further token is an error, as is every malformed or wrong response.
package sasl
