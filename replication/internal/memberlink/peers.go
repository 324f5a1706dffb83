package memberlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Peers is the client of the other members over the member link: go-redis,
// one small pool per member, each connection a member connection of the
// other's server. It carries the internal LOCKSERVER commands.
type Peers struct {
	dial       func(ctx context.Context, addr string) (net.Conn, error)
	log        *slog.Logger // the node's, for go-redis's messages about its dials
	replyError func(reply string) error
	mu         sync.Mutex
	clients    map[string]*redis.Client
}

// NewPeers returns the client of the members that dial reaches
// (Link.DialMember). An error reply from a member is returned as
// replyError(reply); log receives go-redis's messages about failed dials.
func NewPeers(dial func(ctx context.Context, addr string) (net.Conn, error), log *slog.Logger, replyError func(reply string) error) *Peers {
	return &Peers{dial: dial, log: log, replyError: replyError, clients: make(map[string]*redis.Client)}
}

// ErrNotSent is wrapped by the errors of a call that was not sent: the
// command never reached the member.
var ErrNotSent = errors.New("not sent")

// errPeersClosed is the error of a call after Close: not sent.
var errPeersClosed = fmt.Errorf("%w: the node is closing", ErrNotSent)

// client returns the pool for addr, or nil after Close.
func (p *Peers) client(addr string) *redis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clients == nil {
		return nil
	}
	c := p.clients[addr]
	if c == nil {
		opts := &redis.Options{
			Addr: addr,
			// A retried forward could apply twice: never retry.
			MaxRetries:            -1,
			DialTimeout:           2 * time.Second,
			ReadTimeout:           -1, // the context bounds each call
			ContextTimeoutEnabled: true,
			PoolSize:              4,
			DisableIdentity:       true,
			MaintNotificationsConfig: &maintnotifications.Config{
				Mode: maintnotifications.ModeDisabled,
			},
		}
		// The member link's dialer, its failures marked for goRedisLogger.
		opts.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
			conn, err := p.dial(ctx, addr)
			if err != nil {
				return nil, &peerDialError{err: err, log: p.log}
			}
			return conn, nil
		}
		c = redis.NewClient(opts)
		p.clients[addr] = c
	}
	return c
}

// Call sends args to the member whose Raft address is addr and returns its
// reply, a status or bulk string. A retried command could run twice, so a
// call is never retried.
func (p *Peers) Call(ctx context.Context, addr string, args ...[]byte) (string, error) {
	a := make([]any, len(args))
	for i, b := range args {
		a[i] = b
	}
	c := p.client(addr)
	if c == nil {
		return "", errPeersClosed
	}
	v, err := c.Do(ctx, a...).Result()
	if err != nil {
		var rerr redis.Error
		var op *net.OpError
		switch {
		case errors.As(err, &rerr):
			return "", p.replyError(rerr.Error())
		case errors.As(err, &op) && op.Op == "dial", errors.Is(err, errLinkDial):
			return "", fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("unexpected %T reply from %s", v, addr)
	}
	return s, nil
}

// Close closes the pools; calls after it fail as not sent.
func (p *Peers) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, c := range p.clients {
		errs = append(errs, c.Close())
	}
	p.clients = nil
	return errors.Join(errs...)
}
