package replication

import (
	"context"
	"errors"
	"testing"
)

// A call that comes after Close, from a connection still being served while
// the node shuts down, fails as not sent instead of panicking.
func TestRedisPeersCallAfterClose(t *testing.T) {
	p := newRedisPeers("")
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := p.Call(context.Background(), "127.0.0.1:1", []byte("PING"))
	if !errors.Is(err, ErrNotSent) {
		t.Fatalf("Call after Close = %v, want an error wrapping ErrNotSent", err)
	}
}
