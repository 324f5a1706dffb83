package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hcLogger lets hashicorp/raft log through the engine's slog.Logger. raft's
// Trace and Debug lines go out at slog's Debug level, so a logger at the usual
// Info level shows elections, snapshots and failures but not the chatter.
type hcLogger struct {
	log  *slog.Logger
	name string
	args []any
}

func newHCLogger(l *slog.Logger) *hcLogger { return &hcLogger{log: l, name: "raft"} }

func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	for i, a := range args {
		switch a := a.(type) {
		case hclog.Format: // hclog.Fmt: a format and its arguments
			if len(a) > 0 {
				format, _ := a[0].(string)
				args[i] = fmt.Sprintf(format, a[1:]...)
			}
		case error:
			// An RPC that arrives while this node shuts down is no error.
			if errors.Is(a, raft.ErrTransportShutdown) {
				lv = slog.LevelDebug
			}
		}
	}
	if !h.log.Enabled(context.Background(), lv) {
		return
	}
	all := append(append([]any{"component", h.name}, h.args...), args...)
	h.log.Log(context.Background(), lv, msg, all...)
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) enabled(l hclog.Level) bool {
	return h.log.Enabled(context.Background(), slogLevel(l))
}

func (h *hcLogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hcLogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hcLogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hcLogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hcLogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hcLogger) ImpliedArgs() []any { return h.args }

func (h *hcLogger) With(args ...any) hclog.Logger {
	return &hcLogger{log: h.log, name: h.name, args: append(append([]any(nil), h.args...), args...)}
}

func (h *hcLogger) Name() string { return h.name }

func (h *hcLogger) Named(name string) hclog.Logger {
	return &hcLogger{log: h.log, name: h.name + "." + name, args: h.args}
}

func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	return &hcLogger{log: h.log, name: name, args: h.args}
}

// SetLevel does nothing: the slog handler decides what is shown.
func (h *hcLogger) SetLevel(hclog.Level) {}

func (h *hcLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Info, hclog.Warn} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Error
}

func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hcLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{h}
}

// lineWriter logs each write, a line of a standard logger, at Info.
type lineWriter struct{ h *hcLogger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
