package memberlink

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"
)

// go-redis has one logger for the whole process (redis.SetLogger), which
// writes to stderr unless told otherwise, and none per client. A node's
// clients of its peers fail to dial whenever a member is down, and go-redis
// would print each failure on the stderr of a process that asked for no logs
// (a nil Logger) or for JSON ones. So this package sets go-redis's logger
// once, at init, before an application's main can set one: a message about a
// failed dial to a peer goes to that node's own logger at debug level (the
// node logs what the failure means for it), and every other message is
// written exactly as go-redis's default logger writes it: on stderr, with its
// prefix, time, and the file and line that logged it. An application's own
// clients therefore log as they would without lockserver. An application that
// sets its own go-redis logger replaces this one, and then receives the
// peers' failed dials too.
func init() {
	redis.SetLogger(goRedisLogger{std: log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)})
}

type goRedisLogger struct{ std *log.Logger }

func (l goRedisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	for _, a := range v {
		var dial *peerDialError
		if err, ok := a.(error); ok && errors.As(err, &dial) {
			dial.log.Debug("go-redis: " + msg)
			return
		}
	}
	// Three frames up is go-redis's caller of its logger, as its own default
	// logger counts: this Printf, go-redis's forwarding Printf, the caller.
	_ = l.std.Output(3, msg)
}

// peerDialError is a failed dial to a peer, marked as the peers' for
// goRedisLogger; it unwraps to the dial's error.
type peerDialError struct {
	err error
	log *slog.Logger
}

func (e *peerDialError) Error() string { return e.err.Error() }
func (e *peerDialError) Unwrap() error { return e.err }
