package main

import (
	"context"
	"errors"
	"strings"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/redis/go-redis/v9"
)

// scripts are the lock scripts the workloads send, the specification's
// (internal/lockscripts), so that the bench sends exactly what the
// compatibility tests check.
type scripts struct {
	lock, unlock     *script // redisson_lock.lua, redisson_unlock_v2.lua
	compareAndDelete *script // compare_and_delete.lua
}

// script is a Lua script with the body go-redis keeps to itself, which direct
// calls need for their EVAL fallback.
type script struct {
	*redis.Script
	src string
}

func loadScripts() (*scripts, error) {
	read := func(name string) (*script, error) {
		src, err := lockscripts.Source(name)
		if err != nil {
			return nil, err
		}
		return &script{Script: redis.NewScript(src), src: src}, nil
	}
	s := &scripts{}
	var err error
	if s.lock, err = read("redisson_lock.lua"); err != nil {
		return nil, err
	}
	if s.unlock, err = read("redisson_unlock_v2.lua"); err != nil {
		return nil, err
	}
	if s.compareAndDelete, err = read("compare_and_delete.lua"); err != nil {
		return nil, err
	}
	return s, nil
}

// respClient is how a workload talks to a Redis-protocol system: through
// go-redis, or by direct calls into an embedded lockserver. A null reply comes
// back as (nil, nil) from both.
type respClient interface {
	// run sends a script as go-redis's Script.Run does: EVALSHA, then EVAL
	// when the server answers NOSCRIPT.
	run(ctx context.Context, s *script, keys []string, args ...any) (any, error)
	do(ctx context.Context, args ...any) (any, error)
	close() error
}

// goRedis is a go-redis client whose pool is shared by a run's workers.
type goRedis struct{ c *redis.Client }

func newGoRedis(opts *redis.Options, poolSize int) *goRedis {
	o := *opts
	// RESP2 and no CLIENT SETINFO: what Redisson and redis-benchmark speak,
	// the same for every system.
	o.Protocol = 2
	o.DisableIdentity = true
	o.PoolSize = poolSize
	o.MaxRetries = -1 // a failed command is a failed operation, never silently retried
	tlsOptions(&o)
	return &goRedis{c: redis.NewClient(&o)}
}

func (g *goRedis) run(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	return nilOK(s.Run(ctx, g.c, keys, args...).Result())
}

func (g *goRedis) do(ctx context.Context, args ...any) (any, error) {
	return nilOK(g.c.Do(ctx, args...).Result())
}

func (g *goRedis) close() error { return g.c.Close() }

func nilOK(v any, err error) (any, error) {
	if errors.Is(err, redis.Nil) || errors.Is(err, lockserver.ErrNil) {
		return nil, nil
	}
	return v, err
}

// directCalls reaches an embedded lockserver through Server.Do: no
// connection and no RESP.
type directCalls struct{ s *lockserver.Server }

func (d directCalls) run(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "EVALSHA", s.Hash(), len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	v, err := nilOK(d.s.Do(ctx, argv...))
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		argv[0], argv[1] = "EVAL", s.src
		return nilOK(d.s.Do(ctx, argv...))
	}
	return v, err
}

func (d directCalls) do(ctx context.Context, args ...any) (any, error) {
	return nilOK(d.s.Do(ctx, args...))
}

func (d directCalls) close() error { return nil }
