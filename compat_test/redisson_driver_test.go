package compat_test

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/redisson"
)

// A Go stand-in for Redisson's client side: it names keys and channels as
// Redisson does, passes the same arguments, and sends each script the way
// Redisson's CommandAsyncService.evalAsync does with its script cache on
// (EVALSHA; on NOSCRIPT, SCRIPT LOAD and EVALSHA again). Every script and
// command goes to a redis-server and to lockserver, and the replies must be
// equal; only integers that depend on the clock (PTTLs, deadlines) may
// differ, by a little.

// redissonClient is one Redisson client (one ServiceManager) talking to a pair.
type redissonClient struct {
	t testing.TB
	p *pair
	// id is ServiceManager.getId(), a UUID: locks are owned by id:threadId.
	id string
	// publish is PublishSubscribeService.getPublishCommand(): PUBLISH, or
	// SPUBLISH once the PUBSUB SHARDNUMSUB probe found sharded pub/sub.
	publish string
	// proto is the RESP version of its connections (Redisson's
	// Config.protocol): 2, or 3 after HELLO 3.
	proto int
	// noscripts counts NOSCRIPT replies from redis-server and lockserver.
	noscripts [2]int
}

// unlockLatchMs is the unlock latch's lifetime that RedissonBaseLock
// computes from the configured timeout and retries; any value will do.
const unlockLatchMs = 13500

// newRedisson starts a Redisson stand-in on the pair's connections,
// speaking RESP proto.
func newRedisson(t testing.TB, p *pair, proto int) *redissonClient {
	r := &redissonClient{t: t, p: p, id: randomUUID(), publish: "PUBLISH", proto: proto}
	r.hello(p)
	t.Cleanup(func() {
		if r.noscripts[0] != r.noscripts[1] {
			t.Errorf("Redisson's script cache: %d NOSCRIPT replies from redis-server, %d from lockserver", r.noscripts[0], r.noscripts[1])
		}
	})
	return r
}

// hello switches a pair of connections to the client's protocol. The reply
// is compared but for the connection id and the role: a cluster follower
// truthfully calls itself a replica.
func (r *redissonClient) hello(p *pair) {
	if r.proto == 3 {
		p.DoNorm(normHello, "HELLO", "3")
	}
}

// normHello hides the connection id and the role in a HELLO reply.
func normHello(s string) string { return helloRole.ReplaceAllString(normID(s), "${1}ROLE") }

var helloRole = regexp.MustCompile(`(\$4\r\nrole\r\n)\$\d+\r\n\w+`)

// resp turns a RESP2 reply of a test's worked example into the client's
// protocol: a RESP3 client gets a null where RESP2 has a null bulk string.
func (r *redissonClient) resp(want string) string {
	if r.proto == 3 {
		return strings.ReplaceAll(want, nilReply, "_\r\n")
	}
	return want
}

// randomUUID is java.util.UUID.randomUUID().toString().
func randomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// generateID is ServiceManager.generateId(): 16 random bytes in hex, used
// for unlock request ids.
func generateID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lockName is RedissonBaseLock.getLockName: uuid:threadId.
func (r *redissonClient) lockName(thread int) string { return r.id + ":" + strconv.Itoa(thread) }

// rlockTryLock sends RedissonLock.tryLockInnerAsync: owner takes the lock
// name, or enters it again, for redissonLease.
func (r *redissonClient) rlockTryLock(name, owner string) replies {
	return r.eval(redisson.RLockTryLock, []string{name}, redissonLease, owner)
}

// rlockUnlock sends RedissonLock.unlockInnerAsync as unlock request request:
// owner leaves the lock name once, and its last unlock publishes the unlock
// message on the lock's channel.
func (r *redissonClient) rlockUnlock(name, owner, request string) replies {
	ch := redisson.PrefixName("redisson_lock__channel", name)
	return r.eval(redisson.RLockUnlock, []string{name, ch, redisson.UnlockLatch(name, request)}, 0, redissonLease, owner, r.publish, unlockLatchMs)
}

// argStrings formats arguments as Redisson's codecs send them.
func argStrings(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = v
		case []byte:
			out[i] = string(v)
		case int:
			out[i] = strconv.Itoa(v)
		case int64:
			out[i] = strconv.FormatInt(v, 10)
		default:
			panic(fmt.Sprintf("argument %v of type %T", a, a))
		}
	}
	return out
}

// evalsha runs script on one server with Redisson's script cache protocol.
func (r *redissonClient) evalsha(server int, c *rawClient, script string, keys, args []string) string {
	r.t.Helper()
	sum := sha1.Sum([]byte(script))
	sha := hex.EncodeToString(sum[:])
	cmd := append(append([]string{"EVALSHA", sha, strconv.Itoa(len(keys))}, keys...), args...)
	reply := c.Do(cmd...)
	if !strings.HasPrefix(reply, "-NOSCRIPT") {
		return reply
	}
	r.noscripts[server]++
	if loaded := c.Do("SCRIPT", "LOAD", script); loaded != "$40\r\n"+sha+"\r\n" {
		r.t.Fatalf("SCRIPT LOAD replied %q, want the SHA1 %s Redisson computed", loaded, sha)
	}
	return c.Do(cmd...)
}

// replies are what redis-server and lockserver answered to one request.
type replies struct {
	t         testing.TB
	r         *redissonClient
	what      string
	redis, ls string
}

// eval sends a script to both servers.
func (r *redissonClient) eval(script string, keys []string, args ...any) replies {
	r.t.Helper()
	a := argStrings(args)
	what := fmt.Sprintf("script %.60q... KEYS %q ARGV %q", script, keys, a)
	return replies{t: r.t, r: r, what: what, redis: r.evalsha(0, r.p.redis, script, keys, a), ls: r.evalsha(1, r.p.ls, script, keys, a)}
}

// do sends a command to both servers.
func (r *redissonClient) do(args ...any) replies {
	r.t.Helper()
	a := argStrings(args)
	return replies{t: r.t, r: r, what: fmt.Sprintf("%q", a), redis: r.p.redis.Do(a...), ls: r.p.ls.Do(a...)}
}

// same requires byte-equal replies that are not errors, and returns them.
func (x replies) same() string {
	x.t.Helper()
	if x.redis != x.ls {
		x.t.Errorf("%s:\n redis-server: %q\n   lockserver: %q", x.what, x.redis, x.ls)
	} else if strings.HasPrefix(x.redis, "-") {
		x.t.Errorf("%s: both servers replied with an error, the scenario is wrong: %q", x.what, x.redis)
	}
	return x.ls
}

// is requires both replies to equal want, a worked example in RESP2.
func (x replies) is(want string) {
	x.t.Helper()
	want = x.r.resp(want)
	if x.redis != want || x.ls != want {
		x.t.Errorf("%s: want %q\n redis-server: %q\n   lockserver: %q", x.what, want, x.redis, x.ls)
	}
}

// near requires replies equal but for integers that depend on the clock,
// which may differ by up to a second.
func (x replies) near() {
	x.t.Helper()
	if !nearlyEqual(x.redis, x.ls) {
		x.t.Errorf("%s (clock-dependent integers within 1 s):\n redis-server: %q\n   lockserver: %q", x.what, x.redis, x.ls)
	} else if strings.HasPrefix(x.redis, "-") {
		x.t.Errorf("%s: both servers replied with an error, the scenario is wrong: %q", x.what, x.redis)
	}
}

// within requires an integer reply, or a bulk string holding an integer (a
// sorted-set score), in [lo, hi] from both servers, close to each other.
func (x replies) within(lo, hi int64) {
	x.t.Helper()
	x.near()
	for name, r := range map[string]string{"redis-server": x.redis, "lockserver": x.ls} {
		e := respElements(r)
		var n int64
		err := fmt.Errorf("not one element")
		if len(e) == 1 && strings.IndexByte(":$,", e[0][0]) >= 0 {
			n, err = strconv.ParseInt(e[0][1:], 10, 64)
		}
		if err != nil || n < lo || n > hi {
			x.t.Errorf("%s: %s replied %q, want an integer in [%d, %d]", x.what, name, r, lo, hi)
		}
	}
}

// Integers below this are counts and must match exactly; from it up they
// may be clock readings (milliseconds left, epoch milliseconds).
const clockScale = 100

// nearlyEqual compares two RESP replies element by element; integers (and
// bulk strings and doubles holding integers) of clockScale and above may differ by up to
// 1000, all else must be equal.
func nearlyEqual(a, b string) bool {
	ta, tb := respElements(a), respElements(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] == tb[i] {
			continue
		}
		if ta[i][0] != tb[i][0] || strings.IndexByte(":$,", ta[i][0]) < 0 {
			return false
		}
		x, err1 := strconv.ParseInt(ta[i][1:], 10, 64)
		y, err2 := strconv.ParseInt(tb[i][1:], 10, 64)
		if err1 != nil || err2 != nil || min(absInt(x), absInt(y)) < clockScale || absInt(x-y) > 1000 {
			return false
		}
	}
	return true
}

func absInt(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// respElements flattens a RESP2 reply into its elements, each its type byte
// and its value: "*2", ":5", "$payload", "$-1", "+OK".
func respElements(s string) []string {
	var out []string
	rd := bufio.NewReader(strings.NewReader(s))
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return out
		}
		line = strings.TrimSuffix(line, "\r\n")
		if len(line) > 1 && line[0] == '$' && line[1] != '-' {
			n, _ := strconv.Atoi(line[1:])
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(rd, buf); err != nil {
				return append(out, line)
			}
			out = append(out, "$"+string(buf[:n]))
			continue
		}
		out = append(out, line)
	}
}

// connect opens new connections to the pair's two servers for test t.
func (p *pair) connect(t testing.TB) *pair { return p.dial(t) }

// subscriber is a pair of connections subscribed to the same channels on
// both servers, as Redisson's pub/sub connections are.
type subscriber struct {
	t     testing.TB
	p     *pair
	proto int
}

// subscribe opens a subscriber with command (SUBSCRIBE, PSUBSCRIBE or
// SSUBSCRIBE) on channels.
func (r *redissonClient) subscribe(command string, channels ...string) *subscriber {
	r.t.Helper()
	sub := &subscriber{t: r.t, p: r.p.connect(r.t), proto: r.proto}
	r.hello(sub.p)
	sub.p.Send(append([]string{command}, channels...)...)
	for range channels {
		sub.p.Read()
	}
	return sub
}

// message requires the next message on both servers to be payload on
// channel (kind is message or smessage).
func (s *subscriber) message(kind, channel, payload string) {
	s.t.Helper()
	want := fmt.Sprintf("*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(kind), kind, len(channel), channel, len(payload), payload)
	if s.proto == 3 {
		want = ">" + want[1:] // a push
	}
	if got := s.p.Read(); got != want {
		s.t.Errorf("subscriber: got %q, want %q", got, want)
	}
}

// quiet requires that no message is waiting: a PING sent now is answered
// before anything published later, so its reply must come first.
func (s *subscriber) quiet() {
	s.t.Helper()
	s.p.Send("PING")
	pong := "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
	if s.proto == 3 {
		pong = "+PONG\r\n"
	}
	if got := s.p.Read(); got != pong {
		s.t.Errorf("subscriber: a message arrived that nothing should have published: %q", got)
	}
}
