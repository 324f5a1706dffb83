package compat_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/redisson"
	"github.com/lockserver/lockserver/internal/testenv"
)

// WAIT on a server without replicas, as redis-server 7.0 answers it: 0 at
// once for numreplicas <= 0 and inside MULTI, else 0 after the timeout; the
// commands pipelined after it are answered after it; bad arguments get
// Redis's errors.
func TestDiffWaitStandalone(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"SET", "k", "v"},
		{"WAIT", "1", "100"},
		{"WAIT", "5", "50"},
		{"WAIT", "-1", "0"},
		{"WAIT", "0", "100"},
		{"WAIT", "0", "9223372036854775807"},
		{"WAIT", "1", "007"},
		{"WAIT", "1", "1.5"},
		{"WAIT", "1", "+100"},
		{"WAIT", "99999999999999999999", "0"},
		{"WAIT", "x", "-1"},
		{"WAIT", "1", "-1"},
		{"WAIT", "1", "0", "x"},
		// Inside MULTI it does not block, even without a timeout.
		{"MULTI"},
		{"WAIT", "1", "0"},
		{"WAIT", "x", "0"},
		{"SET", "k", "w"},
		{"WAIT", "2", "0"},
		{"EXEC"},
		{"GET", "k"},
	})
	// A pipeline: the replies keep their order around the blocking WAIT.
	for _, cmd := range [][]string{{"SET", "k", "1"}, {"WAIT", "1", "100"}, {"INCR", "k"}, {"WAIT", "0", "0"}, {"GET", "k"}} {
		p.Send(cmd...)
	}
	for range 5 {
		p.Read()
	}
}

// A client that hangs up while WAIT blocks it goes away, as from Redis: its
// connection does not wait for ever. So does one killed meanwhile.
func TestDiffWaitHangup(t *testing.T) {
	p := newPair(t)
	for _, end := range []string{"hang up", "CLIENT KILL"} {
		blocked, other := p.another(), p.another()
		for _, side := range []struct {
			name          string
			blocked, peer *rawClient
		}{{"redis-server", blocked.redis, other.redis}, {"lockserver", blocked.ls, other.ls}} {
			id := strings.Trim(side.blocked.Do("CLIENT", "ID"), ":\r\n")
			entry := regexp.MustCompile(`(?m)^id=` + id + ` .*cmd=(\S+)`)
			side.blocked.Send("WAIT", "1", "0")
			waitFor(t, func() string {
				if m := entry.FindStringSubmatch(side.peer.Do("CLIENT", "LIST")); m == nil || m[1] != "wait" {
					return side.name + ": client " + id + " blocked in WAIT in CLIENT LIST"
				}
				return ""
			})
			if end == "hang up" {
				side.blocked.conn.Close()
			} else if r := side.peer.Do("CLIENT", "KILL", "ID", id); r != ":1\r\n" {
				t.Fatalf("%s: CLIENT KILL ID %s of a client blocked in WAIT = %q", side.name, id, r)
			}
			waitFor(t, func() string {
				if entry.MatchString(side.peer.Do("CLIENT", "LIST")) {
					return fmt.Sprintf("%s: client %s gone from CLIENT LIST after %s during WAIT", side.name, id, end)
				}
				return ""
			})
		}
	}
}

// CLIENT UNBLOCK ends a WAIT as redis-server does: as if it timed out (the
// count), or with an UNBLOCKED error; CLIENT LIST flags the client b while it
// blocks, and a client that is not blocked is not unblocked.
func TestDiffWaitUnblock(t *testing.T) {
	p := newPair(t)
	for _, how := range [][]string{{}, {"TIMEOUT"}, {"ERROR"}} {
		blocked := p.another()
		ids := map[*rawClient]string{}
		for _, side := range []struct{ blocked, peer *rawClient }{{blocked.redis, p.redis}, {blocked.ls, p.ls}} {
			id := strings.Trim(side.blocked.Do("CLIENT", "ID"), ":\r\n")
			ids[side.peer] = id
			entry := regexp.MustCompile(`(?m)^id=` + id + ` .*flags=(\S+) .*cmd=(\S+)`)
			side.blocked.Send("WAIT", "1", "0")
			waitFor(t, func() string {
				if m := entry.FindStringSubmatch(side.peer.Do("CLIENT", "LIST")); m == nil || m[1] != "b" || m[2] != "wait" {
					return "client " + id + " listed with flags=b cmd=wait"
				}
				return ""
			})
		}
		want := p.redis.Do(append([]string{"CLIENT", "UNBLOCK", ids[p.redis]}, how...)...)
		got := p.ls.Do(append([]string{"CLIENT", "UNBLOCK", ids[p.ls]}, how...)...)
		if want != ":1\r\n" || got != want {
			t.Errorf("CLIENT UNBLOCK %v of a client blocked in WAIT: redis-server %q, lockserver %q", how, want, got)
		}
		blocked.Read()
		// Unblocked, it is no longer blocked.
		want = p.redis.Do(append([]string{"CLIENT", "UNBLOCK", ids[p.redis]}, how...)...)
		got = p.ls.Do(append([]string{"CLIENT", "UNBLOCK", ids[p.ls]}, how...)...)
		if want != ":0\r\n" || got != want {
			t.Errorf("CLIENT UNBLOCK %v of a client no longer blocked: redis-server %q, lockserver %q", how, want, got)
		}
		blocked.Do("PING")
	}
}

// Closing the server ends a WAIT that would block for ever, and the server
// does not wait for it.
func TestWaitEndsAtClose(t *testing.T) {
	s, err := lockserver.Open(lockserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, other := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	c.Do("SET", "k", "v")
	c.Send("WAIT", "1", "0")
	waitFor(t, func() string {
		if !strings.Contains(other.Do("CLIENT", "LIST"), "cmd=wait") {
			return "the client blocked in WAIT"
		}
		return ""
	})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close had not returned 15 s after a client blocked in WAIT 1 0")
	}
}

// WAITAOF as Redis 7.2 answers it without an append-only file (Redis 7.0
// has no WAITAOF): numreplicas is waited for as by WAIT.
func TestWaitAOFStandalone(t *testing.T) {
	s := startLockserver(t, lockserver.Options{})
	c := dialRaw(t, s.Addr())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"WAITAOF", "0", "1", "100"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"WAITAOF", "0", "0", "100"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"WAITAOF", "0", "1", "x"}, "-ERR timeout is not an integer or out of range\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"WAITAOF", "0", "1", "0"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n*2\r\n:0\r\n:0\r\n"},
	} {
		if got := c.Do(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// Redisson's replicated and sentinel modes on a healthy cluster: the leader
// reports connected_slaves:2, and after each lock script WAIT 2 must reply 2,
// or Redisson counts the lock as not synced. A follower reports no replicas;
// WAIT there asks the leader and counts the members that hold the write, so
// WAIT 2 is 2 there too. Redisson waits 1000 ms; the test waits longer
// (waitReplicasMs), since under -race at load 20 a follower took more than a
// second to apply an entry, and what is checked is that WAIT counts both
// replicas once they hold the write, not how soon they do.
const waitReplicasMs = "10000"

func TestRedissonWaitOnCluster(t *testing.T) {
	testenv.Long(t)
	attempt.Run(t, func(t testing.TB) {
		c := startCluster(t)
		leader := dialRaw(t, c.server(c.leader).Addr())
		waitFor(t, func() string {
			if n := infoFields(leader.Do("INFO", "REPLICATION"), "connected_slaves")["connected_slaves"]; n != "2" {
				return "connected_slaves:2 on the leader, not " + n
			}
			return ""
		})
		// ROLE lists the same replicas.
		if r := leader.Do("ROLE"); !regexp.MustCompile(`^\*3\r\n\$6\r\nmaster\r\n:\d+\r\n\*2\r\n`).MatchString(r) {
			t.Errorf("ROLE on the leader = %q, want a master with two replicas", r)
		}
		for i := range 20 {
			replicas := redissonReplicaProbe(t, "leader", leader)
			if replicas != "2" {
				t.Fatalf("lock %d: connected_slaves:%s on the leader of a healthy three-member cluster", i, replicas)
			}
			// Redisson sends the script and WAIT in one batch.
			leader.Send("EVAL", redisson.RLockTryLock, "1", "sync:lock:"+strconv.Itoa(i), "30000", "id:1")
			leader.Send("WAIT", replicas, waitReplicasMs)
			if r := leader.Read(); r != nilReply {
				t.Fatalf("lock %d: the lock script replied %q", i, r)
			}
			if r := leader.Read(); r != ":2\r\n" {
				t.Fatalf("lock %d: WAIT 2 %s after the lock script = %q, want :2", i, waitReplicasMs, r)
			}
		}
		follower := dialRaw(t, c.follower().Addr())
		if n := infoFields(follower.Do("INFO", "REPLICATION"), "connected_slaves")["connected_slaves"]; n != "0" {
			t.Errorf("connected_slaves:%s on a follower", n)
		}
		follower.Send("EVAL", redisson.RLockTryLock, "1", "sync:lock:follower", "30000", "id:1")
		follower.Send("WAIT", "2", waitReplicasMs)
		if r := follower.Read(); r != nilReply {
			t.Fatalf("the lock script through a follower replied %q", r)
		}
		if r := follower.Read(); r != ":2\r\n" {
			t.Fatalf("WAIT 2 %s on a follower after the lock script = %q, want :2", waitReplicasMs, r)
		}
	})
}
