package keyspace

import (
	"strings"

	"github.com/lockserver/lockserver/keyspace/internal/glob"
)

// GlobMatch reports whether s matches pattern as Redis's stringmatchlen does:
// the server matches PSUBSCRIBE patterns, PUBSUB CHANNELS and CONFIG GET with
// it. On an empty s Redis's loop never runs, so only an empty pattern matches.
func GlobMatch(pattern []byte, s string) bool {
	if s == "" {
		return len(pattern) == 0
	}
	return glob.Match(pattern, s)
}

// FoldGlobMatch is GlobMatch ignoring ASCII case, as CONFIG GET matches.
func FoldGlobMatch(pattern []byte, s string) bool {
	return GlobMatch([]byte(strings.ToLower(string(pattern))), strings.ToLower(s))
}

// GlobMatchBytes is GlobMatch on a byte string: ACL key and channel patterns
// match command arguments with it.
func GlobMatchBytes(pattern, s []byte) bool {
	if len(s) == 0 {
		return len(pattern) == 0
	}
	return glob.Match(pattern, s)
}
