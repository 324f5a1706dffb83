package compat_test

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// useRESP3 switches both connections of p to RESP3, discarding HELLO's replies
// (they describe each server and differ).
func (p *pair) useRESP3() {
	p.t.Helper()
	p.redis.Do("HELLO", "3")
	p.ls.Do("HELLO", "3")
}

// DoSorted sends a command whose reply is an array in no defined order (a hash
// table's) and compares the elements as sets.
func (p *pair) DoSorted(args ...string) {
	p.t.Helper()
	want := sortedElems(p.redis.Do(args...))
	got := sortedElems(p.ls.Do(args...))
	if got != want {
		p.t.Errorf("%q (sorted):\n redis-server: %q\n   lockserver: %q", args, want, got)
	}
}

// sortedElems splits a flat RESP array of bulk strings into its elements and
// sorts them; anything else is returned as it is.
func sortedElems(raw string) string {
	lines := strings.Split(raw, "\r\n")
	if len(lines) < 2 || (raw[0] != '*' && raw[0] != '~') {
		return raw
	}
	var elems []string
	for i := 1; i+1 < len(lines); i += 2 {
		elems = append(elems, lines[i]+"\r\n"+lines[i+1])
	}
	sort.Strings(elems)
	return lines[0] + "|" + strings.Join(elems, "|")
}

// DoNear sends a command whose integer reply depends on time (TTL, PTTL) and
// accepts replies within tol of each other.
func (p *pair) DoNear(tol int64, args ...string) {
	p.t.Helper()
	want, got := p.redis.Do(args...), p.ls.Do(args...)
	w, errW := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(want, ":")), 10, 64)
	g, errG := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(got, ":")), 10, 64)
	if errW != nil || errG != nil || w-g > tol || g-w > tol {
		p.t.Errorf("%q: redis-server %q, lockserver %q (tolerance %d)", args, want, got, tol)
	}
}

func TestDiffKeyspaceGeneric(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		// DEL, UNLINK, EXISTS, TOUCH, TYPE.
		{"MSET", "a", "1", "b", "2", "c", "3"}, {"EXISTS", "a", "a", "b", "zz"}, {"TOUCH", "a", "zz", "c"},
		{"DEL", "a", "a", "zz"}, {"UNLINK", "b", "c", "b"}, {"EXISTS", "a", "b", "c"}, {"DEL"}, {"EXISTS"},
		{"SET", "s", "v"}, {"HSET", "h", "f", "v"}, {"RPUSH", "l", "x"}, {"SADD", "st", "m"}, {"ZADD", "z", "1", "m"},
		{"TYPE", "s"}, {"TYPE", "h"}, {"TYPE", "l"}, {"TYPE", "st"}, {"TYPE", "z"}, {"TYPE", "none"},
		// EXPIRE family: options, errors, overflow, deletion by past times.
		{"EXPIRE", "s", "100"}, {"TTL", "s"}, {"EXPIRE", "s", "100", "NX"}, {"EXPIRE", "s", "200", "XX"},
		{"EXPIRE", "s", "50", "GT"}, {"EXPIRE", "s", "500", "GT"}, {"EXPIRE", "s", "5000", "LT"},
		{"EXPIRE", "s", "50", "LT"}, {"TTL", "s"}, {"EXPIRE", "s", "10", "NX", "XX"}, {"EXPIRE", "s", "10", "GT", "LT"},
		{"EXPIRE", "s", "10", "NX", "GT"}, {"EXPIRE", "s", "10", "FOO"}, {"EXPIRE", "s", "10", "xx", "gt"},
		{"EXPIRE", "s", "x"}, {"EXPIRE", "s", "1.5"}, {"EXPIRE", "s"},
		{"EXPIRE", "s", "9223372036854775807"}, {"EXPIRE", "s", "-9223372036854775808"},
		{"PEXPIRE", "s", "9223372036854775807"}, {"EXPIREAT", "s", "9223372036854775807"},
		{"PEXPIREAT", "s", "9223372036854775807"}, {"PEXPIRETIME", "s"}, {"EXPIRETIME", "s"},
		{"PEXPIREAT", "s", "4102444800000"}, {"PEXPIRETIME", "s"}, {"EXPIREAT", "s", "4102444801"},
		{"PEXPIRETIME", "s"}, {"EXPIREAT", "s", "4102444800", "GT"}, {"EXPIREAT", "s", "4102444800", "LT"},
		{"PEXPIRETIME", "s"}, {"PEXPIREAT", "s", "4102444800499"}, {"EXPIRETIME", "s"},
		{"PEXPIREAT", "s", "4102444800500"}, {"EXPIRETIME", "s"},
		{"EXPIRE", "nokey", "10"}, {"EXPIRE", "nokey", "x"}, {"EXPIRE", "nokey", "10", "FOO"},
		{"PERSIST", "s"}, {"PERSIST", "s"}, {"PERSIST", "nokey"}, {"TTL", "s"}, {"PTTL", "s"}, {"TTL", "nokey"},
		{"PTTL", "nokey"}, {"EXPIRETIME", "nokey"}, {"PEXPIRETIME", "s"},
		{"EXPIRE", "s", "10", "XX"}, {"EXPIRE", "s", "10", "GT"}, {"EXPIRE", "s", "10", "LT"}, {"TTL", "s"},
		{"EXPIRE", "s", "0"}, {"EXISTS", "s"}, {"SET", "s", "v"}, {"PEXPIRE", "s", "-1"}, {"EXISTS", "s"},
		{"SET", "s", "v"}, {"EXPIREAT", "s", "1"}, {"EXISTS", "s"}, {"SET", "s", "v"}, {"PEXPIREAT", "s", "0"},
		{"EXISTS", "s"}, {"SET", "s", "v"}, {"EXPIRE", "s", "-1", "LT"}, {"EXISTS", "s"},
		{"SET", "s", "v", "EX", "100"}, {"EXPIRE", "s", "-1", "GT"}, {"EXPIRE", "s", "-1", "LT"}, {"EXISTS", "s"},
		{"HSET", "h2", "f", "v"}, {"PEXPIRE", "h2", "100000"}, {"PERSIST", "h2"}, {"TTL", "h2"},
		// RENAME, RENAMENX.
		{"SET", "r1", "v", "EX", "1000"}, {"RENAME", "r1", "r2"}, {"EXISTS", "r1"}, {"GET", "r2"}, {"TTL", "r2"},
		{"RENAME", "r1", "r3"}, {"RENAME", "r2", "r2"}, {"RENAMENX", "r2", "r2"}, {"RENAMENX", "nokey", "x"},
		{"SET", "r4", "w"}, {"RENAMENX", "r2", "r4"}, {"RENAMENX", "r2", "r5"}, {"RENAME", "r5", "h"}, {"TYPE", "h"},
		{"GET", "h"}, {"RENAME", "r5"},
		// COPY.
		{"HSET", "src", "f1", "v1", "f2", "v2"}, {"COPY", "src", "dst"}, {"HGETALL", "dst"}, {"COPY", "src", "dst"},
		{"COPY", "src", "dst", "REPLACE"}, {"COPY", "src", "src"}, {"COPY", "src", "src", "DB", "0"},
		{"COPY", "src", "src", "DB", "1"}, {"COPY", "src", "x", "DB", "16"}, {"COPY", "src", "x", "DB", "x"},
		{"COPY", "src", "x", "DB"}, {"COPY", "src", "x", "FOO"}, {"COPY", "nokey", "x"},
		{"COPY", "src", "x", "DB", "99999999999"}, {"HSET", "dst", "f3", "v3"}, {"HLEN", "src"},
		{"SET", "cs", "v", "PXAT", "4102444800123"}, {"COPY", "cs", "cs2"}, {"PEXPIRETIME", "cs2"},
		{"RPUSH", "cl", "a", "b"}, {"COPY", "cl", "cl2"}, {"RPUSH", "cl2", "c"}, {"LRANGE", "cl", "0", "-1"},
		{"SADD", "cset", "1", "2"}, {"COPY", "cset", "cset2"}, {"SADD", "cset2", "3"}, {"SCARD", "cset"},
		{"ZADD", "cz", "1", "a"}, {"COPY", "cz", "cz2"}, {"ZADD", "cz2", "2", "b"}, {"ZCARD", "cz"},
		// MOVE, SWAPDB, SELECT-scoped checks.
		{"SET", "mv", "v", "EX", "1000"}, {"MOVE", "mv", "1"}, {"EXISTS", "mv"}, {"MOVE", "mv", "1"},
		{"MOVE", "x", "0"}, {"MOVE", "x", "16"}, {"MOVE", "x", "-1"}, {"MOVE", "x", "y"}, {"MOVE", "x", "4294967296"},
		{"SELECT", "1"}, {"GET", "mv"}, {"TTL", "mv"}, {"GET", "src"}, {"SET", "mv2", "v"}, {"SELECT", "0"},
		{"SET", "mv2", "w"}, {"MOVE", "mv2", "1"},
		{"SWAPDB", "0", "1"}, {"GET", "mv"}, {"GET", "mv2"}, {"SWAPDB", "0", "0"}, {"SWAPDB", "0", "16"},
		{"SWAPDB", "x", "1"}, {"SWAPDB", "1", "x"}, {"SWAPDB", "4294967296", "1"}, {"SWAPDB", "-1", "1"},
		{"SWAPDB", "1", "0"},
		// DBSIZE, FLUSHDB, FLUSHALL.
		{"SELECT", "2"}, {"DBSIZE"}, {"MSET", "k1", "1", "k2", "2"}, {"DBSIZE"}, {"FLUSHDB", "FOO"},
		{"FLUSHDB", "ASYNC", "SYNC"}, {"FLUSHDB", "sync"}, {"DBSIZE"}, {"SET", "k", "v"}, {"FLUSHDB", "async"},
		{"DBSIZE"}, {"SET", "k", "v"}, {"FLUSHDB"}, {"DBSIZE"}, {"SET", "k", "v"}, {"SELECT", "0"}, {"FLUSHALL", "FOO"},
		{"FLUSHALL", "SYNC"}, {"DBSIZE"}, {"SELECT", "2"}, {"DBSIZE"}, {"SELECT", "0"},
	})
	// TTLs count down between the two servers' replies: compare with a tolerance.
	p.Do("SET", "t", "v", "EX", "100")
	p.DoNear(1, "TTL", "t")
	p.DoNear(50, "PTTL", "t")
	p.Do("PEXPIRE", "t", "1500")
	p.DoNear(1, "TTL", "t")
	p.Do("PEXPIRE", "t", "1499")
	p.DoNear(1, "TTL", "t")
}

func TestDiffKeyspaceKeysScan(t *testing.T) {
	p := newPair(t)
	for i := 0; i < 300; i++ {
		p.Do("SET", "key:"+strconv.Itoa(i), "v")
	}
	p.Run([][]string{{"HSET", "hkey", "f", "v"}, {"RPUSH", "lkey", "a"}, {"DBSIZE"}})
	for _, pattern := range []string{"*", "key:1*", "key:?", "key:[1-2]", "key:[^1-8]?", "key:[a", "h*", "*key",
		"key:\\1", "k[e]y:1", "[", "\\", "key:[2-1]0", "*:*:*", "key:1[0-9][0-9]"} {
		p.DoSorted("KEYS", pattern)
	}
	// A whole SCAN returns every key exactly once, whatever the COUNT.
	for _, count := range []string{"1", "7", "100", "1000"} {
		for _, opts := range [][]string{{}, {"MATCH", "key:2*"}, {"TYPE", "hash"}, {"TYPE", "STRING", "MATCH", "*5"}} {
			want := map[string]bool{}
			for _, k := range strings.Split(strings.TrimSpace(rawBulks(p.redis.Do("KEYS", matchOf(opts)))), "\n") {
				if k != "" && typeMatches(p, k, opts) {
					want[k] = true
				}
			}
			seen := map[string]bool{}
			cursor := "0"
			for {
				reply := p.ls.Do(append([]string{"SCAN", cursor, "COUNT", count}, opts...)...)
				lines := strings.Split(reply, "\r\n")
				cursor = lines[2]
				for i := 4; i+1 < len(lines); i += 2 {
					k := lines[i+1]
					if seen[k] {
						t.Errorf("SCAN COUNT %s %q returned %q twice", count, opts, k)
					}
					seen[k] = true
				}
				if cursor == "0" {
					break
				}
			}
			if len(seen) != len(want) {
				t.Errorf("SCAN COUNT %s %q returned %d keys, KEYS on redis-server %d", count, opts, len(seen), len(want))
			}
			for k := range want {
				if !seen[k] {
					t.Errorf("SCAN COUNT %s %q missed %q", count, opts, k)
				}
			}
		}
	}
	p.Run([][]string{
		{"SCAN", "x"}, {"SCAN", "-"}, {"SCAN", " 1"}, {"SCAN", "18446744073709551616"}, {"SCAN", "0", "COUNT", "0"},
		{"SCAN", "0", "COUNT", "x"}, {"SCAN", "0", "COUNT"}, {"SCAN", "0", "FOO", "1"}, {"SCAN", "0", "MATCH"},
		{"SELECT", "3"}, {"SCAN", "0"}, {"SCAN", "", "COUNT", "5"}, {"SCAN", "0", "TYPE", "nosuchtype"},
		{"KEYS", "*"}, {"SELECT", "0"},
	})
}

// rawBulks turns a RESP array of bulk strings into lines.
func rawBulks(raw string) string {
	lines := strings.Split(raw, "\r\n")
	var out []string
	for i := 2; i < len(lines); i += 2 {
		out = append(out, lines[i])
	}
	return strings.Join(out, "\n")
}

func matchOf(opts []string) string {
	for i := 0; i+1 < len(opts); i++ {
		if opts[i] == "MATCH" {
			return opts[i+1]
		}
	}
	return "*"
}

func typeMatches(p *pair, key string, opts []string) bool {
	for i := 0; i+1 < len(opts); i++ {
		if opts[i] == "TYPE" {
			return strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(p.redis.Do("TYPE", key), "+")), opts[i+1])
		}
	}
	return true
}

// parseRESP parses one raw RESP2 reply into strings, int64s and slices.
func parseRESP(raw string) (any, string) {
	line, rest, _ := strings.Cut(raw, "\r\n")
	switch line[0] {
	case '+', '-':
		return line[1:], rest
	case ':':
		n, _ := strconv.ParseInt(line[1:], 10, 64)
		return n, rest
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, rest
		}
		return rest[:n], rest[n+2:]
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var elems []any
		for i := 0; i < n; i++ {
			var e any
			e, rest = parseRESP(rest)
			elems = append(elems, e)
		}
		return elems, rest
	}
	return nil, rest
}

// TestDiffKeyspaceCommandTable checks every keyspace command's row against
// redis-server's COMMAND INFO: arity, the write/readonly/denyoom/fast flags,
// and the key positions.
func TestDiffKeyspaceCommandTable(t *testing.T) {
	redis := dialRaw(t, startRedis(t))
	for _, cmd := range keyspace.Commands() {
		if cmd.Layer != keyspace.KeyspaceLayer {
			continue
		}
		info, _ := parseRESP(redis.Do("COMMAND", "INFO", cmd.Name))
		row, ok := info.([]any)[0].([]any)
		if !ok {
			continue // lockserver's own command
		}
		if arity := row[1].(int64); int(arity) != cmd.Arity {
			t.Errorf("%s: arity %d, redis-server %d", cmd.Name, cmd.Arity, arity)
		}
		redisFlags := map[string]bool{}
		for _, f := range row[2].([]any) {
			redisFlags[f.(string)] = true
		}
		for name, flag := range map[string]keyspace.Flags{"write": keyspace.Write, "readonly": keyspace.ReadOnly,
			"denyoom": keyspace.DenyOOM, "fast": keyspace.Fast} {
			if redisFlags[name] != cmd.Has(flag) {
				t.Errorf("%s: flag %s is %v here, %v in redis-server", cmd.Name, name, cmd.Has(flag), redisFlags[name])
			}
		}
		first, last, step := row[3].(int64), row[4].(int64), row[5].(int64)
		if int(first) != cmd.FirstKey || int(last) != cmd.LastKey || int(step) != cmd.KeyStep {
			t.Errorf("%s: keys %d %d %d, redis-server %d %d %d", cmd.Name, cmd.FirstKey, cmd.LastKey, cmd.KeyStep, first, last, step)
		}
	}
}

// TestDiffKeyspaceArity sends every keyspace command with too few and too
// many arguments.
func TestDiffKeyspaceArity(t *testing.T) {
	p := newPair(t)
	for _, cmd := range keyspace.Commands() {
		if cmd.Layer != keyspace.KeyspaceLayer {
			continue
		}
		if info, _ := parseRESP(p.redis.Do("COMMAND", "INFO", cmd.Name)); info.([]any)[0] == nil {
			continue // lockserver's own command
		}
		n := cmd.Arity
		if n < 0 {
			n = -n
		}
		args := []string{strings.ToUpper(cmd.Name)}
		for len(args) < n-1 {
			args = append(args, "a")
		}
		p.Do(args...)
		if cmd.Arity > 0 {
			p.Do(append(args, "a", "b")...)
		}
	}
}
