package acl

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzSetUser feeds ACL SETUSER rules, one per line, to the rule parser. It
// must never panic, and a user it builds must come back the same from its
// binary form (snapshots) and, when Redis's own file format can carry it
// (textSafe), from its description (ACL SAVE, then ACL LOAD).
func FuzzSetUser(f *testing.F) {
	for _, seed := range []string{
		"on\n>secret\n~lock:*\n+@all\n-@dangerous",
		"reset\n%R~r*\n%W~w*\n&chan\n+get\n+select|0\n(~x +set)",
		"+@read\n-get\n+client|list\n-config|set\nallchannels\nresetchannels",
		"(~a\n+get)\n(&b\n+publish)\nclearselectors",
		"#" + strings.Repeat("a", 64) + "\n!" + strings.Repeat("a", 64),
		"nopass\nskip-sanitize-payload\nallkeys\nnocommands\n+@pubsub",
		"(\"~x y\")\n('~z')",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := SetUser(nil, "u", bytes.Split(data, []byte("\n")))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a text")
			}
			return
		}
		users, _, err := Decode(NewRegistry(u).Encode())
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		for _, v := range users {
			if v.name == "u" {
				sameUser(t, u, v)
			}
		}
		if !textSafe(u) {
			return
		}
		again, err := reload(u)
		if err != nil {
			t.Fatalf("reload %q: %v", u.Describe(), err)
		}
		sameUser(t, u, again)
	})
}

// FuzzDecode feeds the binary form of users, as a snapshot holds it, to the
// decoder, which must refuse garbage without panicking; what it accepts must
// encode to a form that decodes to the same users.
func FuzzDecode(f *testing.F) {
	u, _ := SetUser(nil, "u", ops("on", ">p", "~k", "%R~r", "&c", "+@read", "-get", "+select|1", "(~x +set)"))
	f.Add(NewRegistry(u).Encode())
	f.Add(NewRegistry().Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		users, _, err := Decode(data)
		if err != nil {
			return
		}
		again, _, err := Decode(NewRegistry(users...).Encode())
		if err != nil {
			t.Fatalf("decode of an encoding: %v", err)
		}
		for _, a := range users {
			for _, b := range again {
				if a.name == b.name {
					sameUser(t, a, b)
				}
			}
		}
	})
}

// textSafe reports whether Redis's ACL file format can carry u: no first
// argument holds a space (the line is split on spaces), no selector has the
// pattern * beside others (see below), and no selector's
// pattern a quote, backslash or parenthesis (a selector's rules are split as
// redis-cli splits a line, and one ends at a parenthesis).
func textSafe(u *User) bool {
	for _, s := range u.selectors {
		for _, args := range s.firstArgs {
			for _, a := range args {
				if hasSpaces(a) {
					return false
				}
			}
		}
		if !s.root && strings.ContainsAny(s.describeKeys()+s.describeChannels(), "\"'\\()") {
			return false
		}
		// "%RW~*" adds the pattern * with every permission, which Redis
		// describes as "~*"; read back, that is allkeys, which drops the
		// patterns before it (redis-server's ACL LIST and ACL LOAD do the same).
		if len(s.keys) > 1 && slices.ContainsFunc(s.keys, func(k keyPattern) bool { return string(k.pattern) == "*" && k.perm == permAll }) {
			return false
		}
	}
	return true
}
