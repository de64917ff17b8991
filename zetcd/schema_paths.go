package zetcd

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/zetcd/zetcd/encoding"
)

// validatePath reports whether path is a valid znode path by ZooKeeper's PathUtils.validatePath
// (PROTOCOL.md §5). Java checks UTF-16 code units; in Go every rune above U+FFFF (a surrogate
// pair in Java) is rejected, and invalid UTF-8 decodes to U+FFFD, which is rejected too.
func validatePath(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	if path == "/" {
		return true
	}
	if path[len(path)-1] == '/' {
		return false
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	for _, r := range path {
		switch {
		case r == 0,
			r > 0 && r <= 0x1f,
			r >= 0x7f && r <= 0x9f,
			r >= 0xd800 && r <= 0xf8ff,
			r >= 0xfff0,
			r == utf8.RuneError:
			return false
		}
	}
	return true
}

// fixupACL validates the ACL of a create or setACL and expands the "auth" scheme, the way
// ZooKeeper 3.9's PrepRequestProcessor.fixupACL does (checked against 3.9.6; PROTOCOL.md §8):
//   - exact duplicates are removed from the request's list first (the first one stays), and an
//     empty list is InvalidACL;
//   - world:anyone is kept; any other world id is InvalidACL;
//   - auth:<anything> becomes one entry per authenticated identity of the caller (authIDs, in
//     ZooKeeper's order), with no further de-duplication, so auth next to the caller's own
//     digest id stores that id twice; without one it is InvalidACL;
//   - digest, ip (and x509 when enabled) ids must be valid for their scheme; any other scheme
//     (super, sasl, ...) is InvalidACL.
func fixupACL(acl []encoding.ACL, authIDs []encoding.ID, x509 bool) ([]encoding.ACL, error) {
	uniq := make([]encoding.ACL, 0, len(acl))
	for _, a := range acl {
		if !slices.Contains(uniq, a) {
			uniq = append(uniq, a)
		}
	}
	if len(uniq) == 0 {
		return nil, encoding.ErrInvalidACL
	}
	out := make([]encoding.ACL, 0, len(uniq))
	for _, a := range uniq {
		switch {
		case a.ID.Scheme == schemeWorld && a.ID.ID == "anyone":
			out = append(out, a)
		case a.ID.Scheme == schemeAuth:
			if len(authIDs) == 0 {
				return nil, encoding.ErrInvalidACL
			}
			for _, id := range authIDs {
				out = append(out, encoding.ACL{Perms: a.Perms, ID: id})
			}
		case validACLID(a.ID.Scheme, a.ID.ID, x509):
			out = append(out, a)
		default:
			return nil, encoding.ErrInvalidACL
		}
	}
	return out, nil
}

// validDigestID mirrors DigestAuthenticationProvider.isValid: Java's id.split(":") (which drops
// trailing empty strings) must give exactly two parts.
func validDigestID(id string) bool {
	parts := strings.Split(id, ":")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return len(parts) == 2
}
