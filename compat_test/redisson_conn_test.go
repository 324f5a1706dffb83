package compat_test

import (
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/redisson"
)

// Redisson's connection habits, each as Redisson performs it, on
// redis-server and lockserver side by side.

// waitSupport is how CommandAsyncService.syncedEval probes WAIT and WAITAOF
// (Redisson in any mode but single-server): both in one batch. A command is
// supported when it replies (an integer; an array of two integers), and
// unsupported when it fails with "ERR unknown command" naming it. Any other
// reply fails Redisson's lock call, so it fails the test.
func waitSupport(t testing.TB, server string, c *rawClient) []string {
	t.Helper()
	c.Send("WAIT", "0", "0")
	c.Send("WAITAOF", "0", "0", "0")
	var supported []string
	for _, probe := range []struct{ name, reply string }{{"WAIT", `^:\d+\r\n$`}, {"WAITAOF", `^\*2\r\n:\d+\r\n:\d+\r\n$`}} {
		switch r := c.Read(); {
		case regexp.MustCompile(probe.reply).MatchString(r):
			supported = append(supported, probe.name)
		case strings.HasPrefix(r, "-ERR unknown command") && strings.Contains(r, "'"+probe.name+"'"):
		default:
			t.Errorf("%s: %s replied %q; Redisson accepts a reply matching %s or ERR unknown command '%s'", server, probe.name, r, probe.reply, probe.name)
		}
	}
	return supported
}

// infoFields reads fields of an INFO reply.
func infoFields(reply string, names ...string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(reply, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		for _, n := range names {
			if ok && k == n {
				out[k] = v
			}
		}
	}
	return out
}

// redissonReplicaProbe checks what Redisson learns before its first lock
// script in a non-single-server mode, and returns connected_slaves.
func redissonReplicaProbe(t testing.TB, server string, c *rawClient) string {
	t.Helper()
	if s := waitSupport(t, server, c); len(s) == 0 || s[0] != "WAIT" {
		t.Errorf("%s: Redisson finds WAIT unsupported (%v) and gives up syncing replicas", server, s)
	}
	info := infoFields(c.Do("INFO", "ALL"), "connected_slaves", "aof_enabled")
	if info["aof_enabled"] != "0" || info["connected_slaves"] == "" {
		t.Errorf("%s: INFO ALL gives Redisson %v; it needs connected_slaves and aof_enabled:0", server, info)
	}
	return info["connected_slaves"]
}

func TestRedissonConnection(t *testing.T) {
	redissonConnection(t, newPair(t))
}

// redissonConnection checks Redisson's connection habits on p's servers.
func redissonConnection(t *testing.T, p *pair) {
	t.Run("PING on subscribed connections", func(t *testing.T) {
		// Redisson's keepalive PINGs every connection every 30 s, pub/sub ones
		// included, and a RESP2 subscriber must answer ["pong", ""].
		for _, subscribe := range []string{"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"} {
			c := p.connect(t)
			c.Do(subscribe, "redisson_lock__channel:{lock}")
			c.expect("*2\r\n$4\r\npong\r\n$0\r\n\r\n", "PING")
		}
		c := p.connect(t)
		c.DoNorm(normHello, "HELLO", "3")
		c.Do("SUBSCRIBE", "redisson_lock__channel:{lock}")
		c.expect("+PONG\r\n", "PING")
	})

	t.Run("WAIT and WAITAOF probe, then INFO ALL", func(t *testing.T) {
		// Standalone, both report no replicas: Redisson then sends its lock
		// scripts with no WAIT after them.
		p := p.connect(t)
		for server, c := range map[string]*rawClient{"redis-server": p.redis, "lockserver": p.ls} {
			if n := redissonReplicaProbe(t, server, c); n != "0" {
				t.Errorf("%s: connected_slaves:%s on a server without replicas", server, n)
			}
		}
	})

	t.Run("EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA", func(t *testing.T) {
		p := p.connect(t)
		p.expect("+OK\r\n", "SCRIPT", "FLUSH")
		sum := sha1.Sum([]byte(redisson.RLockTryLock))
		sha := hex.EncodeToString(sum[:]) // ServiceManager.calcSHA
		call := []string{"EVALSHA", sha, "1", "conn:lock", "30000", "id:1"}
		p.expect("-NOSCRIPT No matching script. Please use EVAL.\r\n", call...)
		p.expect(respBulk(sha), "SCRIPT", "LOAD", redisson.RLockTryLock)
		p.expect(nilReply, call...)
		// Read-only scripts go through EVALSHA_RO, with the same fallback.
		sum = sha1.Sum([]byte(redisson.ReadIsLocked))
		ro := []string{"EVALSHA_RO", hex.EncodeToString(sum[:]), "1", "conn:lock"}
		p.expect("-NOSCRIPT No matching script. Please use EVAL.\r\n", ro...)
		p.expect(respBulk(hex.EncodeToString(sum[:])), "SCRIPT", "LOAD", redisson.ReadIsLocked)
		p.expect(intReply(0), ro...)
		// A script that writes is refused under EVALSHA_RO in the same words.
		if r := p.Do("EVALSHA_RO", sha, "1", "conn:free", "30000", "id:2"); !strings.HasPrefix(r, "-ERR Write commands are not allowed from read-only scripts.") {
			t.Errorf("EVALSHA_RO of a writing script replied %q", r)
		}
	})

	t.Run("PUBSUB SHARDNUMSUB probe", func(t *testing.T) {
		// ClusterConnectionManager sends it once; any reply but an error turns
		// sharded pub/sub on (see redissonShardedPubSub).
		p := p.connect(t)
		p.expect("*2\r\n$1\r\n0\r\n:0\r\n", "PUBSUB", "SHARDNUMSUB", "0")
		p.expect(":0\r\n", "PUBSUB", "NUMPAT") // checkPatternSupport
	})
}

// expect sends a command to both servers and requires both to reply want.
func (p *pair) expect(want string, args ...string) {
	p.t.Helper()
	if got := p.Do(args...); got != want {
		p.t.Errorf("%q: both servers replied %q, want %q", args, got, want)
	}
}
