package zetcd

import (
	"net/netip"
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

// fixupACL validates and de-duplicates the ACL of a create or setACL the way ZooKeeper's
// PrepRequestProcessor.fixupACL does (PROTOCOL.md §8): an empty list, an unknown scheme or an
// invalid id is InvalidACL. authIDs are the authenticated identities of the caller that the
// "auth" scheme expands to; with none, "auth" is InvalidACL.
func fixupACL(acl []encoding.ACL, authIDs []encoding.ID) ([]encoding.ACL, error) {
	if len(acl) == 0 {
		return nil, encoding.ErrInvalidACL
	}
	out := make([]encoding.ACL, 0, len(acl))
	add := func(a encoding.ACL) {
		for _, have := range out {
			if have == a {
				return
			}
		}
		out = append(out, a)
	}
	for _, a := range acl {
		switch a.ID.Scheme {
		case "world":
			if a.ID.ID != "anyone" {
				return nil, encoding.ErrInvalidACL
			}
			add(a)
		case "auth":
			if len(authIDs) == 0 {
				return nil, encoding.ErrInvalidACL
			}
			for _, id := range authIDs {
				add(encoding.ACL{Perms: a.Perms, ID: id})
			}
		case "digest":
			if !validDigestID(a.ID.ID) {
				return nil, encoding.ErrInvalidACL
			}
			add(a)
		case "ip":
			if !validIPID(a.ID.ID) {
				return nil, encoding.ErrInvalidACL
			}
			add(a)
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

// validIPID accepts an IPv4 or IPv6 address, optionally with a /bits prefix length.
func validIPID(id string) bool {
	if strings.Contains(id, "/") {
		_, err := netip.ParsePrefix(id)
		return err == nil
	}
	_, err := netip.ParseAddr(id)
	return err == nil
}
