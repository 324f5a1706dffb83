package keyspace

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrorReplyThroughAGoError: an error reply returned as a Go error, and
// wrapped on its way, comes back as it was, counted mark included; an error
// that carries none gives none.
func TestErrorReplyThroughAGoError(t *testing.T) {
	for _, r := range []Reply{ErrSyntax, CountedError("ERR counted"), Error("TRYAGAIN no leader")} {
		err := fmt.Errorf("forwarding: %w", r.Err())
		if err.Error() != "forwarding: "+r.Str {
			t.Errorf("%q as an error reads %q", r.Str, err)
		}
		if got, ok := ReplyOf(err); !ok || got.Str != r.Str || got.Counted() != r.Counted() {
			t.Errorf("ReplyOf(%q) = %+v, %v", err, got, ok)
		}
	}
	if got, ok := ReplyOf(errors.New("ERR not a reply")); ok {
		t.Errorf("ReplyOf of a plain error = %+v", got)
	}
	if _, ok := ReplyOf(nil); ok {
		t.Error("ReplyOf(nil) carries a reply")
	}
}
