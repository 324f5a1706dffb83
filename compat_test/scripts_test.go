package compat_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/lockscripts"
)

// The specification's lock scripts (internal/lockscripts), run unmodified as
// clients run them (EVALSHA, and on NOSCRIPT either EVAL or SCRIPT LOAD then
// EVALSHA), on redis-server and on lockserver side by side. Each reply is
// checked against the README table there and against redis-server's;
// internal/lockscripts checks the files against that table's SHA1s.

// lockScriptSHA1 maps each script's name to the SHA1 a client sends for it.
var lockScriptSHA1 = func() map[string]string {
	m := map[string]string{}
	for _, name := range lockscripts.Names() {
		m[name], _ = lockscripts.SHA1(name) // a listed name always reads
	}
	return m
}()

// How a client recovers from NOSCRIPT.
type fallback int

const (
	fallbackEval fallback = iota // go-redis, node clients: EVAL
	fallbackLoad                 // Redisson: SCRIPT LOAD, then EVALSHA again
	evalFirst                    // sesamecare-redlock: EVAL from the start
)

// scriptClient runs scripts on one server as a client library does.
type scriptClient struct {
	t         *testing.T
	c         *rawClient
	how       fallback
	bodies    map[string]string
	noscripts int // NOSCRIPT replies seen
}

func (s *scriptClient) run(name string, keys []string, args ...string) string {
	s.t.Helper()
	body := s.bodies[name]
	sha := lockScriptSHA1[name]
	tail := append(append([]string{strconv.Itoa(len(keys))}, keys...), args...)
	if s.how == evalFirst {
		return s.c.Do(append([]string{"EVAL", body}, tail...)...)
	}
	r := s.c.Do(append([]string{"EVALSHA", sha}, tail...)...)
	if !strings.HasPrefix(r, "-NOSCRIPT ") {
		return r
	}
	s.noscripts++
	if r != "-NOSCRIPT No matching script. Please use EVAL.\r\n" {
		s.t.Fatalf("NOSCRIPT reply %q", r)
	}
	if s.how == fallbackEval {
		return s.c.Do(append([]string{"EVAL", body}, tail...)...)
	}
	if loaded := s.c.Do("SCRIPT", "LOAD", body); loaded != "$40\r\n"+sha+"\r\n" {
		s.t.Fatalf("SCRIPT LOAD %s replied %q", name, loaded)
	}
	return s.c.Do(append([]string{"EVALSHA", sha}, tail...)...)
}

// step is one script call and the reply the README says it gives. want is
// the exact reply, or "pttl" for an integer remaining lease in (0, lease].
type step struct {
	script string
	keys   []string
	args   []string
	want   string
	lease  int
	// then checks the keyspace after the call: a command and its reply
	then []string
	got  string
}

const (
	nilReply = "$-1\r\n"
	lease    = 30000
)

func intReply(n int) string { return ":" + strconv.Itoa(n) + "\r\n" }

// lockSteps walks every row of the README table for lock key k.
func lockSteps(k string) []step {
	ls := strconv.Itoa(lease)
	ch := k + ":channel"
	return []step{
		// redisson_lock: nil when acquired or re-entered (count +1), else the holder's PTTL
		{script: "redisson_lock.lua", keys: []string{k}, args: []string{ls, "A:1"}, want: nilReply, then: []string{"HGET", k, "A:1"}, got: "$1\r\n1\r\n"},
		{script: "redisson_lock.lua", keys: []string{k}, args: []string{ls, "A:1"}, want: nilReply, then: []string{"HGET", k, "A:1"}, got: "$1\r\n2\r\n"},
		{script: "redisson_lock.lua", keys: []string{k}, args: []string{ls, "B:1"}, want: "pttl", lease: lease},
		// redisson_unlock_v1: nil if not the owner, 0 while still held, 1 when released
		{script: "redisson_unlock_v1.lua", keys: []string{k, ch}, args: []string{"0", ls, "B:1"}, want: nilReply},
		{script: "redisson_unlock_v1.lua", keys: []string{k, ch}, args: []string{"0", ls, "A:1"}, want: intReply(0), then: []string{"HGET", k, "A:1"}, got: "$1\r\n1\r\n"},
		{script: "redisson_unlock_v1.lua", keys: []string{k, ch}, args: []string{"0", ls, "A:1"}, want: intReply(1), then: []string{"EXISTS", k}, got: intReply(0)},
		{script: "redisson_unlock_v1.lua", keys: []string{k, ch}, args: []string{"0", ls, "A:1"}, want: nilReply},
		// redisson_unlock_v2: also 1 when the lock key does not exist
		{script: "redisson_unlock_v2.lua", keys: []string{k, ch}, args: []string{"0", ls, "A:1"}, want: intReply(1)},
		{script: "redisson_lock.lua", keys: []string{k}, args: []string{ls, "A:1"}, want: nilReply},
		{script: "redisson_unlock_v2.lua", keys: []string{k, ch}, args: []string{"0", ls, "B:1"}, want: nilReply},
		{script: "redisson_unlock_v2.lua", keys: []string{k, ch}, args: []string{"0", ls, "A:1"}, want: intReply(1), then: []string{"EXISTS", k}, got: intReply(0)},
		// reentrant_lock: 1 when acquired or re-entered, else the PTTL
		{script: "reentrant_lock.lua", keys: []string{k}, args: []string{ls, "A"}, want: intReply(1), then: []string{"HGET", k, "A"}, got: "$1\r\n1\r\n"},
		{script: "reentrant_lock.lua", keys: []string{k}, args: []string{ls, "A"}, want: intReply(1), then: []string{"HGET", k, "A"}, got: "$1\r\n2\r\n"},
		{script: "reentrant_lock.lua", keys: []string{k}, args: []string{ls, "B"}, want: "pttl", lease: lease},
		// reentrant_unlock: the new count while held, DEL's 1 when released, 0 for others
		{script: "reentrant_unlock.lua", keys: []string{k}, args: []string{"", "B"}, want: intReply(0)},
		{script: "reentrant_unlock.lua", keys: []string{k}, args: []string{"", "A"}, want: intReply(1), then: []string{"HGET", k, "A"}, got: "$1\r\n1\r\n"},
		{script: "reentrant_unlock.lua", keys: []string{k}, args: []string{"", "A"}, want: intReply(1), then: []string{"EXISTS", k}, got: intReply(0)},
		{script: "reentrant_unlock.lua", keys: []string{k}, args: []string{"", "A"}, want: intReply(0)},
	}
}

// tokenSteps covers the compare-and-delete unlocks, whose lock is a string
// set with SET key token NX PX.
func tokenSteps(k string) []step {
	return []step{
		{script: "compare_and_delete.lua", keys: []string{k}, args: []string{"other"}, want: intReply(0), then: []string{"GET", k}, got: "$5\r\ntoken\r\n"},
		{script: "compare_and_delete.lua", keys: []string{k}, args: []string{"token"}, want: intReply(1), then: []string{"EXISTS", k}, got: intReply(0)},
		{script: "compare_and_delete.lua", keys: []string{k}, args: []string{"token"}, want: intReply(0)},
	}
}

// check runs one step on both servers and compares both replies with the
// README's and with each other.
func (st step) check(t testing.TB, redis, ls *scriptClient) {
	t.Helper()
	want := redis.run(st.script, st.keys, st.args...)
	got := ls.run(st.script, st.keys, st.args...)
	for server, r := range map[string]string{"redis-server": want, "lockserver": got} {
		if st.want != "pttl" {
			if r != st.want {
				t.Errorf("%s %s %q %q: %q, README says %q", server, st.script, st.keys, st.args, r, st.want)
			}
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r, ":"), "\r\n"))
		if err != nil || !strings.HasPrefix(r, ":") || n <= 0 || n > st.lease {
			t.Errorf("%s %s %q %q: %q, want the remaining lease in (0, %d]", server, st.script, st.keys, st.args, r, st.lease)
		}
	}
	if st.want != "pttl" && want != got {
		t.Errorf("%s %q %q:\n redis-server: %q\n   lockserver: %q", st.script, st.keys, st.args, want, got)
	}
	if st.then != nil {
		for server, c := range map[string]*rawClient{"redis-server": redis.c, "lockserver": ls.c} {
			if r := c.Do(st.then...); r != st.got {
				t.Errorf("%s after %s %q: %q replied %q, want %q", server, st.script, st.args, st.then, r, st.got)
			}
		}
	}
}

func TestLockScripts(t *testing.T) { lockScriptSessions(t, newPair(t)) }

// lockScriptSessions runs the lock scripts on both servers of p, with each
// of the fallbacks clients use, and compares every reply.
func lockScriptSessions(t *testing.T, p *pair) {
	bodies := map[string]string{}
	for name := range lockScriptSHA1 {
		bodies[name] = lockscripts.MustSource(t, name)
	}
	for _, how := range []struct {
		name string
		how  fallback
	}{{"EVALSHA then EVAL", fallbackEval}, {"EVALSHA then SCRIPT LOAD", fallbackLoad}, {"EVAL", evalFirst}} {
		t.Run(how.name, func(t *testing.T) {
			p.Run([][]string{{"SCRIPT", "FLUSH"}, {"FLUSHALL"}})
			redis := &scriptClient{t: t, c: p.redis, how: how.how, bodies: bodies}
			ls := &scriptClient{t: t, c: p.ls, how: how.how, bodies: bodies}
			for _, st := range lockSteps("lock:" + how.name) {
				st.check(t, redis, ls)
			}
			p.Do("SET", "tok:"+how.name, "token", "NX", "PX", strconv.Itoa(lease))
			for _, st := range tokenSteps("tok:" + how.name) {
				st.check(t, redis, ls)
			}
			// fixed_key_unlock touches the literal key 'lock'
			p.Do("SET", "lock", "token", "NX", "PX", strconv.Itoa(lease))
			fixed := func(token, want string) {
				st := step{script: "fixed_key_unlock.lua", args: []string{token}, want: want}
				st.check(t, redis, ls)
			}
			fixed("other", intReply(0))
			fixed("token", intReply(1))
			fixed("token", intReply(0))
			if how.how != evalFirst && (redis.noscripts == 0 || ls.noscripts != redis.noscripts) {
				t.Errorf("NOSCRIPT fallbacks: redis-server %d, lockserver %d", redis.noscripts, ls.noscripts)
			}
		})
	}
}

// A lease that runs out frees the lock for another owner, on both servers.
func TestLockScriptsExpiry(t *testing.T) {
	p := newPair(t)
	bodies := map[string]string{"redisson_lock.lua": lockscripts.MustSource(t, "redisson_lock.lua")}
	redis := &scriptClient{t: t, c: p.redis, how: fallbackLoad, bodies: bodies}
	ls := &scriptClient{t: t, c: p.ls, how: fallbackLoad, bodies: bodies}
	step{script: "redisson_lock.lua", keys: []string{"exp"}, args: []string{"100", "A:1"}, want: nilReply}.check(t, redis, ls)
	step{script: "redisson_lock.lua", keys: []string{"exp"}, args: []string{"100", "B:1"}, want: "pttl", lease: 100}.check(t, redis, ls)
	time.Sleep(400 * time.Millisecond) // well past the 100 ms lease
	step{script: "redisson_lock.lua", keys: []string{"exp"}, args: []string{"30000", "B:1"}, want: nilReply,
		then: []string{"HGET", "exp", "A:1"}, got: nilReply}.check(t, redis, ls)
}

// Two owners contend for a Redisson lock: exactly one holds it at a time,
// and each unlock that releases it publishes the message to waiters.
func TestLockScriptsContention(t *testing.T) {
	p := newPair(t)
	bodies := map[string]string{}
	for _, name := range []string{"redisson_lock.lua", "redisson_unlock_v1.lua"} {
		bodies[name] = lockscripts.MustSource(t, name)
	}
	sub := p.another()
	sub.Do("SUBSCRIBE", "waiters")
	redis := &scriptClient{t: t, c: p.redis, how: fallbackLoad, bodies: bodies}
	ls := &scriptClient{t: t, c: p.ls, how: fallbackLoad, bodies: bodies}
	ls2 := strconv.Itoa(lease)
	for round := 0; round < 3; round++ {
		holder, waiter := "A:1", "B:1"
		if round%2 == 1 {
			holder, waiter = waiter, holder
		}
		step{script: "redisson_lock.lua", keys: []string{"c"}, args: []string{ls2, holder}, want: nilReply}.check(t, redis, ls)
		step{script: "redisson_lock.lua", keys: []string{"c"}, args: []string{ls2, waiter}, want: "pttl", lease: lease}.check(t, redis, ls)
		step{script: "redisson_unlock_v1.lua", keys: []string{"c", "waiters"}, args: []string{"unlocked", ls2, waiter}, want: nilReply}.check(t, redis, ls)
		step{script: "redisson_unlock_v1.lua", keys: []string{"c", "waiters"}, args: []string{"unlocked", ls2, holder}, want: intReply(1)}.check(t, redis, ls)
		// The waiter hears of the release on both servers, in the same words.
		sub.Read()
	}
}

// The embedding API runs scripts too, with no connection and no RESP.
func TestLockScriptsInProcess(t *testing.T) {
	s := startLockserver(t, lockserver.Options{Addr: "-"})
	ctx := context.Background()
	lock := lockscripts.MustSource(t, "redisson_lock.lua")
	if r, err := s.Do(ctx, "EVAL", lock, 1, "k", lease, "A:1"); r != nil || err != lockserver.ErrNil {
		t.Fatalf("acquire: %v, %v; README says nil", r, err)
	}
	r, err := s.Do(ctx, "EVALSHA", lockScriptSHA1["redisson_lock.lua"], 1, "k", lease, "B:1")
	if n, ok := r.(int64); err != nil || !ok || n <= 0 || n > lease {
		t.Fatalf("contend: %v (%T), %v; want the remaining lease", r, r, err)
	}
}
