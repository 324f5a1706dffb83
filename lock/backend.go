package lock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/internal/direct"
	"github.com/redis/go-redis/v9"
)

// A Backend is where locks live: an embedded lockserver, reached by direct
// calls, or any server a go-redis client reaches. It plays the part of one
// Redisson client: its locks are held by "<id>:<n>", a random id and one
// number per lock object, as Redisson's by "<uuid>:<threadId>". Make one per
// server and share it; Close it when done.
type Backend struct {
	// do runs one command and returns go-redis's types, with nil for a null.
	do        func(ctx context.Context, args ...any) (any, error)
	newPubSub func() *redis.PubSub
	closeFn   func() error

	id      string
	holders atomic.Int64

	notifyOnce sync.Once
	n          *notifier
}

// EmbeddedServer is a lockserver running in this process: a
// *lockserver.Server. The lock package asks no more of it, so that a
// service that locks only through go-redis compiles in none of the server.
type EmbeddedServer interface {
	// Do runs one command with no RESP and no socket; a null reply is
	// lockserver.ErrNil.
	Do(ctx context.Context, args ...any) (any, error)
	// Dialer connects go-redis to the server in memory.
	Dialer() func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Embedded is a Backend on a server embedded in this process. Commands run
// through its Do, with no RESP and no socket. Waiters are woken by a
// subscription over its Dialer, one in-memory connection, which needs the
// server's password when it has one.
func Embedded(srv EmbeddedServer, password string) *Backend {
	ps := redis.NewClient(&redis.Options{Dialer: srv.Dialer(), Password: password, MaxRetries: -1})
	return newBackend(func(ctx context.Context, args ...any) (any, error) {
		v, err := srv.Do(ctx, args...)
		if errors.Is(err, direct.ErrNil) {
			return nil, nil
		}
		return v, err
	}, func() *redis.PubSub { return ps.Subscribe(context.Background()) }, ps.Close)
}

// Redis is a Backend on the servers c reaches: a redis.Client on one node,
// a FailoverClient that follows the leader through Sentinel discovery, or a
// ClusterClient. The Backend does not close c.
func Redis(c redis.UniversalClient) *Backend {
	return newBackend(func(ctx context.Context, args ...any) (any, error) {
		v, err := c.Do(ctx, args...).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return v, err
	}, func() *redis.PubSub { return c.Subscribe(context.Background()) }, nil)
}

func newBackend(do func(context.Context, ...any) (any, error), newPubSub func() *redis.PubSub, closeFn func() error) *Backend {
	var raw [16]byte
	crand.Read(raw[:])
	return &Backend{do: do, newPubSub: newPubSub, closeFn: closeFn, id: hex.EncodeToString(raw[:])}
}

// Close ends the Backend's subscription. Locks still held stay held until
// their leases run out.
func (b *Backend) Close() error {
	if b.n != nil {
		b.n.close()
	}
	if b.closeFn != nil {
		return b.closeFn()
	}
	return nil
}

// holderID names a new lock object's holder.
func (b *Backend) holderID() string {
	return b.id + ":" + strconv.FormatInt(b.holders.Add(1), 10)
}

// notifier starts the Backend's subscriber on first use.
func (b *Backend) notifier() *notifier {
	b.notifyOnce.Do(func() { b.n = newNotifier(b.newPubSub()) })
	return b.n
}

// eval runs s as Redisson does: EVALSHA, and EVAL when the server does not
// have it yet.
func (b *Backend) eval(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "EVALSHA", s.sha, len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	v, err := b.do(ctx, argv...)
	if msg, ok := replyError(err); ok && strings.HasPrefix(msg, "NOSCRIPT") {
		argv[0], argv[1] = "EVAL", s.src
		v, err = b.do(ctx, argv...)
	}
	return v, err
}

// evalRetry runs s until it gets a reply, as long as ctx allows, retrying
// what a client may retry: errors that say nothing was written, and errors
// after which the outcome is unknown (every script of this package may be
// run again). uncertain reports that an earlier try may have taken effect.
func (b *Backend) evalRetry(ctx context.Context, s *script, keys []string, args ...any) (v any, uncertain bool, err error) {
	backoff := 5 * time.Millisecond
	for {
		v, err = b.eval(ctx, s, keys, args...)
		if err == nil {
			return v, uncertain, nil
		}
		switch {
		case ctx.Err() != nil:
			return nil, true, ctx.Err()
		case errors.Is(err, direct.ErrClosed), errors.Is(err, redis.ErrClosed):
			// Closed for good on this side: nothing to wait for.
			return nil, uncertain, err
		case refused(err):
		case unknown(err):
			uncertain = true
		default:
			return nil, uncertain, err
		}
		if sleep(ctx, backoff) != nil {
			return nil, uncertain, ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// replyError returns the text of an error reply from either backend.
func replyError(err error) (string, bool) {
	// lockserver.ReplyError is a redis.Error too.
	var re redis.Error
	if errors.As(err, &re) {
		return re.Error(), true
	}
	return "", false
}

// refused reports an error reply that says nothing was written: no leader,
// a leadership change, a server loading or read-only. go-redis retries these
// itself a few times; Do does not.
func refused(err error) bool {
	msg, ok := replyError(err)
	if !ok {
		return false
	}
	for _, p := range []string{"TRYAGAIN", "CLUSTERDOWN", "LOADING", "READONLY", "MASTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	// A cluster member that is stopping refuses before writing anything.
	return strings.Contains(msg, "nothing was written")
}

// unknown reports an error after which a command may or may not have taken
// effect: lockserver's UNKNOWN, or no reply at all (a broken connection, a
// timeout).
func unknown(err error) bool {
	msg, ok := replyError(err)
	return !ok || strings.HasPrefix(msg, "UNKNOWN")
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(jitter(d))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jitter spreads d over [d/2, d], so that clients that failed together do
// not retry together.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// errClosed is a wait on a Backend that was closed.
var errClosed = errors.New("lock: backend closed")
