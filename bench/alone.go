package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// startGoRedisAlone is go-redis over an in-memory connection with nothing
// behind it: each command is answered at once with the reply a free lock
// gets in the lock and setnx workloads, and nothing runs. Its row is what
// go-redis itself costs, and so the most that any server reached through
// go-redis in this process (the embedded row) could do on this machine.
func startGoRedisAlone(ctx context.Context, b *bench) (*instance, error) {
	answers := map[string]string{
		b.scripts.lock.Hash():             "$-1\r\n", // acquired
		b.scripts.unlock.Hash():           ":1\r\n",  // released
		b.scripts.compareAndDelete.Hash(): ":1\r\n",  // deleted
	}
	opts := &redis.Options{Dialer: func(context.Context, string, string) (net.Conn, error) {
		return &cannedConn{answers: answers}, nil
	}}
	return &instance{
		client:    func(pool int) respClient { return newGoRedis(opts, pool) },
		cpu:       selfCPU,
		inProcess: true,
		only:      []string{"lock", "setnx"},
		stop:      func() {},
	}, nil
}

// cannedConn answers the commands written to it without running them:
// EVALSHA with the reply answers holds for the script, SET with OK, anything
// else (go-redis's HELLO when it connects) with an unknown-command error.
type cannedConn struct {
	answers map[string]string
	mu      sync.Mutex
	in, out []byte
}

func (c *cannedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = append(c.in, b...)
	for {
		args, rest, ok := parseCommand(c.in)
		if !ok {
			break
		}
		c.in = rest
		reply := "-ERR unknown command\r\n"
		switch name := strings.ToUpper(string(args[0])); {
		case name == "EVALSHA" && len(args) > 1:
			if r, ok := c.answers[string(args[1])]; ok {
				reply = r
			}
		case name == "SET":
			reply = "+OK\r\n"
		}
		c.out = append(c.out, reply...)
	}
	return len(b), nil
}

// parseCommand takes one complete RESP multibulk command from the front of
// b: its arguments and what follows it, or ok false if b does not hold one.
func parseCommand(b []byte) (args [][]byte, rest []byte, ok bool) {
	line := func() (int, bool) {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 1 {
			return 0, false
		}
		n, err := strconv.Atoi(string(b[1:i]))
		b = b[i+2:]
		return n, err == nil
	}
	n, ok := line()
	if !ok || n < 1 {
		return nil, nil, false
	}
	for range n {
		size, ok := line()
		if !ok || size < 0 || len(b) < size+2 {
			return nil, nil, false
		}
		args = append(args, b[:size])
		b = b[size+2:]
	}
	return args, b, true
}

// errNothingToRead is what a Read finds when no command awaits its reply:
// go-redis reads only after it writes, so it never does.
var errNothingToRead = errors.New("canned connection: nothing written to answer")

func (c *cannedConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) == 0 {
		return 0, errNothingToRead
	}
	n := copy(b, c.out)
	c.out = c.out[n:]
	return n, nil
}

func (c *cannedConn) Close() error                     { return nil }
func (c *cannedConn) LocalAddr() net.Addr              { return cannedAddr{} }
func (c *cannedConn) RemoteAddr() net.Addr             { return cannedAddr{} }
func (c *cannedConn) SetDeadline(time.Time) error      { return nil }
func (c *cannedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cannedConn) SetWriteDeadline(time.Time) error { return nil }

type cannedAddr struct{}

func (cannedAddr) Network() string { return "memory" }
func (cannedAddr) String() string  { return "canned" }
