package memberlink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/freeport"
)

// A call that comes after Close, from a connection still being served while
// the node shuts down, fails as not sent instead of panicking.
func TestRedisPeersCallAfterClose(t *testing.T) {
	p := NewPeers(nil, slog.New(slog.DiscardHandler), nil)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := p.Call(context.Background(), "127.0.0.1:1", []byte("PING"))
	if !errors.Is(err, ErrNotSent) {
		t.Fatalf("Call after Close = %v, want an error wrapping ErrNotSent", err)
	}
}

// go-redis's message about a failed dial to a peer goes to the node's logger,
// at debug level, not to the process's stderr (goredis_log.go).
func TestRedisPeersDialFailureGoesToTheNodeLog(t *testing.T) {
	var logs bytes.Buffer
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	p := NewPeers(dial, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	defer p.Close()
	nobody := freeport.MustAddr(t)
	if _, err := p.Call(context.Background(), nobody, []byte("PING")); !errors.Is(err, ErrNotSent) {
		t.Fatalf("Call to nobody = %v, want an error wrapping ErrNotSent", err)
	}
	if want := "level=DEBUG msg=\"go-redis: redis: connection pool: failed to dial after"; !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), nobody) {
		t.Errorf("the node's log holds no %q line about %s:\n%s", want, nobody, logs.String())
	}
}
