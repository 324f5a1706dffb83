package replication

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raft's log lines reach slog with their hclog.Fmt arguments formatted, Debug
// lines hidden at Info, and the transport-shutdown noise of a clean stop
// demoted to Debug.
func TestHCLogger(t *testing.T) {
	var buf bytes.Buffer
	h := newHCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	h.Named("net").Info("initial configuration", "servers", hclog.Fmt("%+v", []int{1, 2}))
	h.Debug("chatter", "n", 1)
	h.Error("failed to decode incoming command", "error", fmt.Errorf("wrapped: %w", raft.ErrTransportShutdown))
	h.Error("real trouble", "error", errors.New("disk full"))
	got := buf.String()
	for _, want := range []string{`msg="initial configuration" component=raft.net servers="[1 2]"`, `msg="real trouble" component=raft error="disk full"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"chatter", "failed to decode"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("log shows %q at Info:\n%s", unwanted, got)
		}
	}
}
