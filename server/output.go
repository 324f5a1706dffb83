package server

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/server/internal/resp"
)

// Output buffer limits (Redis's client-output-buffer-limit). A client's
// output is what has been rendered for it and not yet written to its socket
// (len(out), and a write in progress). Each class of client has a hard limit,
// which closes a client as soon as its output reaches it, and a soft limit,
// which closes it once its output has stayed at or above it for longer than
// the soft seconds. 0 turns a limit off. The check is Redis's
// checkClientOutputBufferLimits, made whenever output is added and once a
// second for every client (watchClients), so that a client whose write is
// stuck is closed too.
//
// Replies of a batch are written as they are rendered once 256 kB has
// queued (flushAt), rather than all at the end, so that a client that asked
// for much more than it reads holds the server's memory only up to that and
// one reply, whatever its limits: a write blocks while the client reads
// slowly, and fails once it has gone.

// Classes of clients, in the order CONFIG GET lists them. lockserver has no
// replica connections (members replicate through Raft): the replica limits
// are kept and shown, and apply to no client.
const (
	classNormal = iota
	classReplica
	classPubSub
	numClasses
)

var classNames = [numClasses]string{"normal", "slave", "pubsub"}

type outputLimit struct {
	hard, soft uint64
	seconds    int64
}

type outputLimits [numClasses]outputLimit

// defaultOutputLimits are Redis 7.0's.
var defaultOutputLimits = outputLimits{
	classNormal:  {},
	classReplica: {hard: 256 << 20, soft: 64 << 20, seconds: 60},
	classPubSub:  {hard: 32 << 20, soft: 8 << 20, seconds: 60},
}

// flushAt is how much rendered output a batch queues before it writes.
const flushAt = 256 << 10

// String is the value CONFIG GET shows.
func (l *outputLimits) String() string {
	var b strings.Builder
	for class, lim := range l {
		if class > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(classNames[class] + " " + strconv.FormatUint(lim.hard, 10) + " " +
			strconv.FormatUint(lim.soft, 10) + " " + strconv.FormatInt(lim.seconds, 10))
	}
	return b.String()
}

// Redis's reasons for refusing a value.
var (
	errLimitArgs    = errors.New("Wrong number of arguments in buffer limit configuration.")                   //lint:ignore ST1005 Redis's text
	errLimitClass   = errors.New("Invalid client class specified in buffer limit configuration.")              //lint:ignore ST1005 Redis's text
	errLimitSetting = errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.") //lint:ignore ST1005 Redis's text
)

// parseOutputLimits applies a CONFIG SET value, "class hard soft seconds"
// for any of the classes, to cur, as Redis does: all or nothing.
func parseOutputLimits(v string, cur outputLimits) (outputLimits, error) {
	f := strings.Fields(v)
	if len(f)%4 != 0 {
		return cur, errLimitArgs
	}
	next := cur
	for i := 0; i < len(f); i += 4 {
		class := -1
		switch strings.ToLower(f[i]) {
		case "normal":
			class = classNormal
		case "slave", "replica":
			class = classReplica
		case "pubsub":
			class = classPubSub
		default:
			return cur, errLimitClass
		}
		hard, ok1 := limitBytes(f[i+1])
		soft, ok2 := limitBytes(f[i+2])
		seconds, err := strconv.ParseInt(f[i+3], 10, 64)
		if !ok1 || !ok2 || err != nil || seconds < 0 {
			return cur, errLimitSetting
		}
		next[class] = outputLimit{hard: hard, soft: soft, seconds: seconds}
	}
	return next, nil
}

// limitBytes parses a limit as Redis's memtoull does: digits, then an
// optional unit (b, k, kb, m, mb, g, gb, any case); a number too large for
// 64 bits is the largest there is, and a product too large wraps, as in C.
func limitBytes(s string) (uint64, bool) {
	digits := strings.TrimLeft(s, "0123456789")
	num := s[:len(s)-len(digits)]
	var mul uint64
	switch strings.ToLower(digits) {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1 << 10
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1 << 20
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1 << 30
	default:
		return 0, false
	}
	if num == "" {
		return 0, true // strtoull of nothing
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		n = math.MaxUint64
	}
	return n * mul, true
}

// class is the client's class for its output limits: pubsub while it has a
// subscription, normal otherwise.
func (c *conn) class() int {
	if c.subscribed() {
		return classPubSub
	}
	return classNormal
}

// limited reports whether the client's class has any output limit.
func (c *conn) limited() bool {
	l := &c.srv.outputLimits.Load()[c.class()]
	return l.hard > 0 || l.soft > 0
}

// replyBuf is the size of the reply buffer every Redis client has, whose
// bytes Redis does not count against its limits (CLIENT LIST's obl): only
// the reply list after it (omem) counts.
const replyBuf = 16 << 10

// outputQueued is the client's output: queued, and being written. omu held.
func (c *conn) outputQueued() uint64 { return uint64(len(c.out) + c.writing) }

// outputUsed is the client's output that counts against its limits, beyond
// what Redis's reply buffer would hold. omu held.
func (c *conn) outputUsed() uint64 { return c.outputQueued() - min(c.outputQueued(), replyBuf) }

// overLimit reports whether output of used bytes passes the client's limits
// at now, keeping the time its soft limit was first reached. omu held.
func (c *conn) overLimit(used uint64, now time.Time) bool {
	l := c.srv.outputLimits.Load()[c.class()]
	hard := l.hard > 0 && used >= l.hard
	soft := l.soft > 0 && used >= l.soft
	if !soft {
		c.softSince = time.Time{}
		return hard
	}
	if c.softSince.IsZero() {
		c.softSince = now
		return hard
	}
	return hard || now.Sub(c.softSince) > time.Duration(l.seconds)*time.Second
}

// overflowed closes a client whose output passed its limits, once: it drops
// its output and its pending replies, which are rendered no more, and counts
// it in INFO's client_output_buffer_limit_disconnections.
func (c *conn) overflowed() {
	if !c.overflow.CompareAndSwap(false, true) {
		return
	}
	c.srv.stats.outputLimited.Add(1)
	c.dropped("output_buffer_limit", "class", classNames[c.class()])
	c.kill()
	c.omu.Lock()
	c.out, c.spare = nil, nil
	c.omu.Unlock()
}

// checkOutput closes the client if its output passes its limits now.
func (c *conn) checkOutput(now time.Time) {
	c.omu.Lock()
	over := !c.gone && c.overLimit(c.outputUsed(), now)
	c.omu.Unlock()
	if over {
		c.overflowed()
	}
}

// watchClients looks at every client once a second until the server
// closes, as Redis's clientsCron does: it checks the client's output
// against its limits, so that a client whose output stays above its soft
// limit with nothing added, such as one whose write is stuck, is closed when
// its time is up, and lets the read buffer of an idle client go
// (releaseIdle).
func (s *Server) watchClients() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			var conns []*conn
			s.each(func(c *conn) { conns = append(conns, c) })
			for _, c := range conns {
				c.checkOutput(now)
				c.releaseIdle(now)
			}
		}
	}
}

// send queues one reply of a batch for the client, and writes what is
// queued once it reaches flushAt. An inline connection's
// replies go to its client's buffer whenever they are written, so they stay
// here, where its limits see them.
func (c *conn) send(r keyspace.Reply) {
	if c.write1(r) >= flushAt && !c.inline {
		c.flush() // on failure the connection is gone: later replies are dropped
	}
}

// write1 queues one reply for the client and returns how much is queued. A
// client whose output passes its limits is closed.
func (c *conn) write1(r keyspace.Reply) int {
	c.omu.Lock()
	if c.gone {
		c.omu.Unlock()
		return 0
	}
	c.out = resp.AppendReply(c.out, r, int(c.proto.Load()))
	n := len(c.out)
	over := c.limited() && c.overLimit(c.outputUsed(), time.Now())
	c.omu.Unlock()
	if over {
		c.overflowed()
		return 0
	}
	return n
}

// write queues raw bytes for the client.
func (c *conn) write(b []byte) {
	c.omu.Lock()
	if !c.gone {
		c.out = append(c.out, b...)
	}
	c.omu.Unlock()
}

// deliver queues a published message from the engine's goroutine. It never
// blocks on the socket: the push writer sends it. A subscriber whose queued
// output passes its limits is disconnected, as Redis does.
func (c *conn) deliver(msg keyspace.Reply) {
	c.omu.Lock()
	if c.gone {
		c.omu.Unlock()
		return
	}
	c.out = resp.AppendReply(c.out, msg, int(c.proto.Load()))
	over := c.limited() && c.overLimit(c.outputUsed(), time.Now())
	c.omu.Unlock()
	if over {
		c.overflowed()
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pushWriter sends what publishers queue while the serving goroutine waits
// for the client. It runs from the first subscription until the connection ends.
func (c *conn) pushWriter() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
			if c.flush() != nil {
				return
			}
		}
	}
}

// maxSpare is the largest output buffer kept for reuse after a write.
const maxSpare = 64 << 10

// flush writes what is queued.
func (c *conn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.omu.Lock()
	out := c.out
	if len(out) == 0 {
		c.omu.Unlock()
		return nil
	}
	c.out, c.spare = c.spare[:0], nil
	c.writing = len(out)
	c.omu.Unlock()

	n, err := c.nc.Write(out)
	c.written.Add(int64(n))
	c.writes.Add(1)

	c.omu.Lock()
	c.writing = 0
	if cap(out) <= maxSpare {
		c.spare = out[:0]
	}
	if err != nil {
		// The client is gone: what is queued for it, and what would be,
		// is dropped.
		c.gone, c.out, c.spare = true, nil, nil
	}
	c.omu.Unlock()
	if err != nil {
		c.nc.Close()
	}
	return err
}
