package compat_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/testenv"
)

// redis-cli (Debian's redis-tools) pointed at lockserver prints what it
// prints against redis-server: the same commands piped to both, its
// RESP3 mode, --pipe mass insertion and --eval.

// redisCli runs redis-cli against addr with stdin and returns what it wrote
// to stdout and to stderr, and its exit status.
func redisCli(t testing.TB, tg clientTarget, stdin string, args ...string) string {
	t.Helper()
	bin := testenv.Need(t, "redis-cli")
	host, port, _ := strings.Cut(tg.addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := []string{"-h", host, "-p", port}
	if tg.tls != nil {
		conn = append(conn, tg.tls.cliArgs()...)
	}
	cmd := exec.CommandContext(ctx, bin, append(conn, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The password goes in the environment: with -a redis-cli warns on stderr.
	cmd.Env = os.Environ()
	if tg.password != "" {
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+tg.password)
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s: redis-cli %q did not finish: %v", tg.name, args, ctx.Err())
	}
	return fmt.Sprintf("stdout:\n%sstderr:\n%sexit: %v", stdout.String(), stderr.String(), err)
}

// cliCommands is an interactive session typed into redis-cli, one command a
// line, touching every reply type.
const cliCommands = `PING
ECHO "hello world"
SET k v
GET k
GET missing
SET n 10
INCRBY n 5
INCR k
APPEND k " more"
GET k
HSET h f1 a f2 1.5
HGETALL h
HGET h nope
LPUSH l x y z
LRANGE l 0 -1
LPOP missing
SADD s m
SMEMBERS s
ZADD z 1.5 a 2 b
ZRANGE z 0 -1 WITHSCORES
ZSCORE z a
EXISTS k n missing
TYPE h
DEL k n missing
SET lock token NX PX 30000
SET lock other NX PX 30000
EVAL "return {1, 'two', {3}, redis.call('GET', 'lock'), false}" 0
EVAL "return redis.call('INCR', 'h')" 0
MULTI
INCR counter
INCR counter
EXEC
SELECT 3
DBSIZE
SELECT 0
CLIENT SETNAME cli
CLIENT GETNAME
NOSUCHCOMMAND arg
GET
`

func TestClientRedisCli(t *testing.T) {
	redisCliScenarios(t, redisTarget(t, "s3cret"), lockserverTarget(t, "s3cret"))
}

// redisCliScenarios runs redis-cli against redis-server and against a
// lockserver target, comparing what it prints.
func redisCliScenarios(t *testing.T, redisT, ls clientTarget) {
	servers := []clientTarget{redisT, ls}
	// each runs one redis-cli invocation on both servers and compares.
	each := func(label, stdin string, args ...string) []string {
		t.Helper()
		out := make([]string, len(servers))
		for i, tg := range servers {
			out[i] = redisCli(t, tg, stdin, args...)
		}
		if out[0] != out[1] {
			compareOutputs(t, "redis-server "+label, out[0], ls.name+" "+label, out[1])
		}
		return out
	}
	flush := func() { each("FLUSHALL", "FLUSHALL\n") }

	t.Run("interactive", func(t *testing.T) {
		flush()
		raw := each("raw", cliCommands)[0]
		flush()
		typed := each("--no-raw", cliCommands, "--no-raw")[0]
		for _, line := range []string{"(integer) 15", `1) "z"`, "(nil)", "(error) ERR value is not an integer or out of range"} {
			if !strings.Contains(typed, line+"\n") {
				t.Errorf("redis-cli --no-raw against redis-server printed no %q line:\n%s", line, typed)
			}
		}
		if !strings.Contains(raw, "hello world\n") {
			t.Errorf("redis-cli against redis-server did not echo:\n%s", raw)
		}
	})

	t.Run("RESP3", func(t *testing.T) {
		flush()
		out := each("-3", "HSET h f 1.5\nHGETALL h\nGET missing\nZADD z 2.5 m\nZSCORE z m\nSADD s x\nSMEMBERS s\nEXISTS h\nCONFIG GET maxmemory\n", "-3", "--no-raw")[0]
		for _, line := range []string{`1# "f" => "1.5"`, "(double) 2.5", `1~ "x"`} {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("redis-cli -3 against redis-server printed no %q line:\n%s", line, out)
			}
		}
	})

	t.Run("pipe", func(t *testing.T) {
		flush()
		var proto strings.Builder
		const n = 2000
		for i := range n {
			k, v := "key:"+strconv.Itoa(i), strings.Repeat("v", i%50)
			fmt.Fprintf(&proto, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
		}
		proto.WriteString("*2\r\n$4\r\nINCR\r\n$5\r\nkey:7\r\n") // a string that is not a number
		out := each("--pipe", proto.String(), "--pipe")[0]
		if !strings.Contains(out, fmt.Sprintf("errors: 1, replies: %d", n+1)) {
			t.Errorf("redis-cli --pipe against redis-server:\n%s", out)
		}
		each("after --pipe", "DBSIZE\nGET key:1999\nSTRLEN key:49\n")
	})

	t.Run("eval", func(t *testing.T) {
		flush()
		dir := t.TempDir()
		script := filepath.Join(dir, "args.lua")
		if err := os.WriteFile(script, []byte("return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], redis.call('INCR', KEYS[1])}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		each("--eval", "", "--eval", script, "k1", "k2", ",", "a1", "a2")
		each("--eval --no-raw", "", "--no-raw", "--eval", script, "k1", "k2", ",", "a1", "a2")
		// The specification's lock scripts, run from their files as an
		// operator would (README.md's example): acquire, re-enter, and read
		// the count back.
		lock := filepath.Join("..", "internal", "lockscripts", "reentrant_lock.lua")
		for range 2 {
			each("--eval reentrant_lock.lua", "", "--no-raw", "--eval", lock, "cli:lock", ",", "30000", "owner-1")
		}
		out := each("HGET", "HGET cli:lock owner-1\n", "--no-raw")[0]
		if !strings.Contains(out, `"2"`) {
			t.Errorf("after two acquisitions through --eval, redis-server's count is not 2:\n%s", out)
		}
		each("--eval of a missing file", "", "--eval", filepath.Join(dir, "missing.lua"))
	})

	t.Run("README", func(t *testing.T) {
		// The redis-cli lines of README.md, as a new user runs them from the
		// project root, each followed there by the reply it prints.
		flush()
		readme, err := os.ReadFile(filepath.Join("..", "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		const prefix = "    redis-cli -p 6379 "
		lines := 0
		for _, line := range strings.Split(string(readme), "\n") {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			lines++
			cmd, reply, ok := strings.Cut(strings.TrimPrefix(line, prefix), " # ")
			cmd = strings.TrimSpace(cmd)
			if !ok {
				t.Errorf("README.md: %q does not say what it prints (a trailing \"# reply\")", line)
				continue
			}
			args := strings.Fields(cmd)
			for i, a := range args {
				if strings.HasSuffix(a, ".lua") {
					args[i] = filepath.Join("..", a)
				}
			}
			if got, want := each("README: "+cmd, "", args...)[0], "stdout:\n"+reply+"\nstderr:\nexit: <nil>"; got != want {
				t.Errorf("README.md: %s\nredis-server printed:\n%s\nREADME.md says:\n%s", cmd, got, want)
			}
		}
		if lines == 0 {
			t.Errorf("README.md has no %q lines", prefix)
		}
	})
}
