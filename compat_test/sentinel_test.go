package compat_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/testenv"
)

// The SENTINEL commands of a lockserver cluster against real Sentinels:
// redis-server in Sentinel mode (Debian's redis-sentinel is the same binary)
// monitoring a real master with two replicas, three Sentinels in all. Replies
// must have Sentinel's shape: the same RESP types, the same fields in the same
// order, the same flags and counts. Values that necessarily differ (run ids,
// ports, timings, offsets, epochs) are compared by kind only.

// respTree is one parsed RESP2 or RESP3 reply.
type respTree struct {
	typ   byte
	str   string // the text of a scalar; "-1" for a RESP2 null array
	elems []respTree
}

// parseTree parses one raw reply and returns it and what follows it.
func parseTree(raw string) (respTree, string) {
	line, rest, _ := strings.Cut(raw, "\r\n")
	v := respTree{typ: line[0], str: line[1:]}
	switch v.typ {
	case '$', '=', '!':
		n, _ := strconv.Atoi(v.str)
		if n >= 0 {
			v.str, rest = rest[:n], rest[n+2:]
		}
	case '*', '%', '~', '>':
		n, _ := strconv.Atoi(v.str)
		if v.typ == '%' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			var e respTree
			e, rest = parseTree(rest)
			v.elems = append(v.elems, e)
		}
	}
	return v, rest
}

// isInstance reports whether v is a Sentinel instance description: a RESP3
// map, or a RESP2 array of field names and values starting with "name".
func (v respTree) isInstance() bool {
	return v.typ == '%' || v.typ == '*' && len(v.elems) >= 2 && len(v.elems)%2 == 0 && v.elems[0].str == "name"
}

// fields returns an instance's fields by name.
func (v respTree) fields() map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(v.elems); i += 2 {
		m[v.elems[i].str] = v.elems[i+1].str
	}
	return m
}

// sentinelLiteral are the numeric fields whose values must equal Sentinel's:
// counts and constants. Other numbers are ports, timings, offsets and epochs,
// and slave-priority, which the test sets to 0 on the real replicas.
var sentinelLiteral = map[string]bool{
	"num-slaves": true, "num-other-sentinels": true, "quorum": true, "link-refcount": true,
	"master-link-down-time": true, "replica-announced": true,
	"voted-leader-epoch": true, "parallel-syncs": true,
}

// shape renders v with the values that necessarily differ replaced by their
// kind: <int>, <runid> (40 hex digits), <ip:port>.
func (v respTree) shape() string {
	var b strings.Builder
	v.writeShape(&b, "")
	return b.String()
}

func (v respTree) writeShape(b *strings.Builder, field string) {
	b.WriteByte(v.typ)
	if len(v.elems) == 0 && v.typ != '*' && v.typ != '%' {
		b.WriteString(maskValue(v.str, field))
		return
	}
	b.WriteString(strconv.Itoa(len(v.elems)))
	if v.str == "-1" {
		b.WriteString("null")
	}
	b.WriteByte('[')
	instance := v.isInstance()
	for i, e := range v.elems {
		if i > 0 {
			b.WriteByte(' ')
		}
		name := ""
		if instance && i%2 == 1 {
			name = v.elems[i-1].str
		}
		e.writeShape(b, name)
	}
	b.WriteByte(']')
}

func maskValue(s, field string) string {
	if sentinelLiteral[field] {
		return s
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return "<int>"
	}
	if len(s) == 40 && strings.Trim(s, "0123456789abcdef") == "" {
		return "<runid>"
	}
	if _, port, err := net.SplitHostPort(s); err == nil && port != "" {
		return "<ip:port>"
	}
	return s
}

// startSentinelProc starts redis-server in Sentinel mode, monitoring
// masterAddr as "mymaster" with quorum 2. Failures are detected after a
// second; a failover, which needs a replica that may be promoted, is retried
// only after ten minutes.
func startSentinelProc(t testing.TB, masterAddr string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(masterAddr)
	mine := freeport.MustPort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 2\n"+
		"sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 600000\n", mine, dir, host, port)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return runRedis(t, mine, conf, "--sentinel")
}

// waitFor polls cond until it returns "" or 20 s pass; cond says what it
// still waits for.
func waitFor(t testing.TB, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sentinelCmd sends one command on a new connection and returns the raw reply.
func sentinelCmd(t testing.TB, addr string, args ...string) string {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.conn.Close()
	return c.Do(args...)
}

// sameShape fails the test unless the two raw replies have the same shape.
func sameShape(t testing.TB, what, redisRaw, lsRaw string) {
	t.Helper()
	want, _ := parseTree(redisRaw)
	got, _ := parseTree(lsRaw)
	if want.shape() != got.shape() {
		t.Errorf("%s:\n redis-sentinel: %s\n     lockserver: %s", what, want.shape(), got.shape())
	}
}

func TestDiffSentinel(t *testing.T) {
	testenv.Long(t)
	testenv.Need(t, "redis-server")
	master := startRedis(t)
	mhost, mport, _ := net.SplitHostPort(master)
	var replicas []string
	for range 2 {
		// Priority 0: no Sentinel failover can promote them, so the master's
		// failure below leaves a stable state to compare.
		r := startRedis(t, "--replicaof", mhost, mport, "--replica-priority", "0")
		waitFor(t, func() string {
			if info := sentinelCmd(t, r, "INFO", "replication"); !strings.Contains(info, "master_link_status:up") {
				return "replica " + r + " to sync"
			}
			return ""
		})
		replicas = append(replicas, r)
	}
	var sentinels []string
	for range 3 {
		sentinels = append(sentinels, startSentinelProc(t, master))
	}
	s1 := sentinels[0]
	waitFor(t, func() string {
		m, _ := parseTree(sentinelCmd(t, s1, "SENTINEL", "MASTER", "mymaster"))
		if f := m.fields(); f["num-slaves"] != "2" || f["num-other-sentinels"] != "2" {
			return "the Sentinel to find 2 replicas and 2 Sentinels: " + m.shape()
		}
		rs, _ := parseTree(sentinelCmd(t, s1, "SENTINEL", "REPLICAS", "mymaster"))
		for _, r := range rs.elems {
			if r.fields()["master-link-status"] != "ok" {
				return "the replicas' links to be ok: " + rs.shape()
			}
		}
		return ""
	})

	attempt.Run(t, func(t testing.TB) {
		c := startCluster(t)
		leader := c.server(c.leader).Addr()
		for _, m := range c.Nodes {
			addr := m.Server().Addr()
			waitFor(t, func() string {
				rs, _ := parseTree(sentinelCmd(t, addr, "SENTINEL", "REPLICAS", "mymaster"))
				got := sentinelCmd(t, addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
				lhost, lport, _ := net.SplitHostPort(leader)
				if want := fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(lhost), lhost, len(lport), lport); got != want || len(rs.elems) != 2 {
					return fmt.Sprintf("member %s to report the leader %s and 2 replicas: %q, %s", addr, leader, got, rs.shape())
				}
				return ""
			})
		}

		same := [][]string{
			{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"},
			{"SENTINEL", "MASTERS"},
			{"SENTINEL", "masters"},
			{"SENTINEL", "MASTER", "mymaster"},
			{"SENTINEL", "REPLICAS", "mymaster"},
			{"SENTINEL", "SLAVES", "mymaster"},
			{"SENTINEL", "SENTINELS", "mymaster"},
			{"SENTINEL", "MYID"},
		}
		exact := [][]string{
			{"SENTINEL", "CKQUORUM", "mymaster"},
			{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nope"},
			{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "MYMASTER"},
			{"SENTINEL", "MASTER", "nope"},
			{"SENTINEL", "REPLICAS", "nope"},
			{"SENTINEL", "SLAVES", "nope"},
			{"SENTINEL", "SENTINELS", "nope"},
			{"SENTINEL", "CKQUORUM", "nope"},
			{"SENTINEL", "FAILOVER", "nope"},
			{"SENTINEL"},
			{"SENTINEL", "NOPE"},
			{"SENTINEL", "MASTERS", "x"},
			{"SENTINEL", "MASTER"},
			{"SENTINEL", "MASTER", "mymaster", "x"},
			{"SENTINEL", "REPLICAS"},
			{"SENTINEL", "SLAVES", "mymaster", "x"},
			{"SENTINEL", "SENTINELS"},
			{"SENTINEL", "MYID", "x"},
			{"SENTINEL", "GET-MASTER-ADDR-BY-NAME"},
			{"SENTINEL", "CKQUORUM"},
			{"SENTINEL", "FAILOVER"},
			{"SENTINEL", "HELP", "x"},
		}
		for _, proto := range []string{"2", "3"} {
			rs := dialRaw(t, s1)
			rs.Do("HELLO", proto)
			for i, m := range c.Nodes {
				ls := dialRaw(t, m.Server().Addr())
				ls.Do("HELLO", proto)
				for _, cmd := range same {
					sameShape(t, fmt.Sprintf("RESP%s, member %d: %q", proto, i, cmd), rs.Do(cmd...), ls.Do(cmd...))
				}
				for _, cmd := range exact {
					if want, got := rs.Do(cmd...), ls.Do(cmd...); got != want {
						t.Errorf("RESP%s, member %d: %q:\n redis-sentinel: %q\n     lockserver: %q", proto, i, cmd, want, got)
					}
				}
				// ROLE: the leader answers as the master does, a follower as a replica.
				peer := replicas[0]
				if i == c.leader {
					peer = master
				}
				rr := dialRaw(t, peer)
				rr.Do("HELLO", proto)
				sameShape(t, fmt.Sprintf("RESP%s, member %d: ROLE", proto, i), rr.Do("ROLE"), ls.Do("ROLE"))
			}
		}

		// SENTINEL HELP lists a subset of Sentinel's lines; only FAILOVER's
		// description says what lockserver does instead.
		redisHelp, _ := parseTree(sentinelCmd(t, s1, "SENTINEL", "HELP"))
		lsHelp, _ := parseTree(sentinelCmd(t, leader, "SENTINEL", "HELP"))
		have := map[string]bool{}
		for _, l := range redisHelp.elems {
			have[l.str] = true
		}
		for i, l := range lsHelp.elems {
			if !have[l.str] && lsHelp.elems[i-1].str != "FAILOVER <master-name>" {
				t.Errorf("SENTINEL HELP line %q is not Sentinel's", l.str)
			}
		}

		// A failover with no replica that may be promoted, as a standalone
		// server has none.
		standalone := startLockserver(t, lockserver.Options{})
		if want, got := sentinelCmd(t, s1, "SENTINEL", "FAILOVER", "mymaster"), sentinelCmd(t, standalone.Addr(), "SENTINEL", "FAILOVER", "mymaster"); got != want {
			t.Errorf("SENTINEL FAILOVER without a replica to promote:\n redis-sentinel: %q\n     lockserver: %q", want, got)
		}

		// The master dies. Sentinel keeps reporting it, down; a member that lost
		// touch with the leader keeps reporting the last one, down. No attempt
		// can follow this one: redis-server is gone.
		attempt.Own(t)
		dialRaw(t, master).Send("SHUTDOWN", "NOSAVE")
		survivor := c.server((c.leader + 1) % 3)
		c.Nodes[c.leader].Stop()
		c.Nodes[(c.leader+2)%3].Stop()
		downFlags := func(addr string) func() string {
			return func() string {
				m, _ := parseTree(sentinelCmd(t, addr, "SENTINEL", "MASTER", "mymaster"))
				if f := m.fields(); f["flags"] != "s_down,o_down,master,disconnected" || f["failover-state"] != "" {
					return addr + " to report the master down and no failover under way: " + m.shape()
				}
				return ""
			}
		}
		waitFor(t, downFlags(s1))
		waitFor(t, downFlags(survivor.Addr()))
		for _, cmd := range [][]string{{"SENTINEL", "MASTER", "mymaster"}, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"}} {
			sameShape(t, fmt.Sprintf("master down: %q", cmd), sentinelCmd(t, s1, cmd...), sentinelCmd(t, survivor.Addr(), cmd...))
		}

		// The other Sentinels die too: a failover could no longer be authorized.
		for _, s := range sentinels[1:] {
			dialRaw(t, s).Send("SHUTDOWN", "NOSAVE")
		}
		waitFor(t, func() string {
			if r := sentinelCmd(t, s1, "SENTINEL", "CKQUORUM", "mymaster"); !strings.HasPrefix(r, "-NOQUORUM") {
				return "the Sentinel to find the others down: " + r
			}
			return ""
		})
		if want, got := sentinelCmd(t, s1, "SENTINEL", "CKQUORUM", "mymaster"), sentinelCmd(t, survivor.Addr(), "SENTINEL", "CKQUORUM", "mymaster"); got != want {
			t.Errorf("SENTINEL CKQUORUM alone:\n redis-sentinel: %q\n     lockserver: %q", want, got)
		}
	})
}
