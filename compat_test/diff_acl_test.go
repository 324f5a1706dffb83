package compat_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/keyspace"
)

// render writes a parsed reply back as a compact string, to compare parts of
// two replies.
func (v respTree) render() string {
	if v.elems == nil {
		return string(v.typ) + v.str
	}
	parts := make([]string, len(v.elems))
	for i, e := range v.elems {
		parts[i] = e.render()
	}
	return string(v.typ) + "[" + strings.Join(parts, " ") + "]"
}

// TestDiffCommandSpecs compares what COMMAND INFO says of every command and
// subcommand lockserver has with what redis-server 7.0 says: the ACL
// categories and the key specifications must be the same, in RESP2 and
// RESP3. ACL rules and key permissions are built on them.
func TestDiffCommandSpecs(t *testing.T) {
	p := newPair(t)
	for _, resp3 := range []bool{false, true} {
		if resp3 {
			p.useRESP3()
		}
		compared := 0
		for _, name := range strings.Split(listOf(p.ls.Do("COMMAND", "LIST")), "\n") {
			want, _ := parseTree(p.redis.Do("COMMAND", "INFO", name))
			if len(want.elems) != 1 || len(want.elems[0].elems) == 0 {
				continue // not in Redis 7.0 (WAITAOF, LOCKSERVER, SENTINEL, ...)
			}
			got, _ := parseTree(p.ls.Do("COMMAND", "INFO", name))
			w, g := want.elems[0].elems, got.elems[0].elems
			if w[6].render() != g[6].render() {
				t.Errorf("%s categories: redis-server %s, lockserver %s", name, w[6].render(), g[6].render())
			}
			if w[8].render() != g[8].render() {
				t.Errorf("%s key specs:\n redis-server %s\n   lockserver %s", name, w[8].render(), g[8].render())
			}
			compared++
		}
		if compared < 200 {
			t.Errorf("compared %d commands; want every one of lockserver's that Redis 7.0 has", compared)
		}
	}
}

// TestDiffACLCat compares ACL CAT: the categories, and the commands of each,
// which are Redis 7.0's (those lockserver does not serve included: ACL rules
// may name them) and lockserver's own (LOCKSERVER, SENTINEL, WAITAOF, ...).
func TestDiffACLCat(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"ACL", "CAT"},
		{"ACL", "CAT", "nosuch"},
		{"ACL", "CAT", "read", "x"},
	})
	for _, cat := range keyspace.CategoryNames() {
		want := strings.Split(listOf(p.redis.Do("ACL", "CAT", cat)), "\n")
		got := strings.Split(listOf(p.ls.Do("ACL", "CAT", strings.ToUpper(cat))), "\n")
		got = slices.DeleteFunc(got, lockserverOnly(p))
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("ACL CAT %s:\n redis-server %q\n   lockserver %q", cat, want, got)
		}
	}
}

// lockserverOnly returns a test of whether a command lockserver has is one
// Redis 7.0 lacks.
func lockserverOnly(p *pair) func(name string) bool {
	return func(name string) bool {
		info, _ := parseTree(p.redis.Do("COMMAND", "INFO", name))
		return len(info.elems[0].elems) == 0 && !strings.HasPrefix(name, "nosuch")
	}
}

// TestDiffCommandGetKeys compares COMMAND GETKEYS and GETKEYSANDFLAGS, which
// read the key specifications ACL key permissions are checked with.
func TestDiffCommandGetKeys(t *testing.T) {
	p := newPair(t)
	for _, sub := range []string{"GETKEYS", "GETKEYSANDFLAGS"} {
		for _, c := range [][]string{
			{"get", "k"}, {"set", "k", "v"}, {"set", "k", "v", "get"}, {"set", "k", "v", "EX", "1", "GET"},
			{"mset", "a", "1", "b", "2"}, {"mget", "a", "b"}, {"del", "a", "b"}, {"exists", "a"},
			{"lmove", "a", "b", "left", "right"}, {"rename", "a", "b"}, {"renamenx", "a", "b"},
			{"copy", "a", "b"}, {"rpoplpush", "a", "b"}, {"getex", "a"}, {"hset", "h", "f", "v"},
			{"eval", "return 1", "2", "k1", "k2", "a"}, {"eval", "return 1", "0"},
			{"eval", "return 1", "x"}, {"eval", "return 1", "-1"}, {"eval", "return 1", "5", "k"},
			{"evalsha_ro", "abc", "1", "k"}, {"eval_ro", "return 1", "1", "k"},
			{"memory", "usage", "k"}, {"watch", "a", "b"}, {"touch", "a"}, {"unlink", "a"},
			{"spublish", "ch", "m"}, {"ssubscribe", "a"}, {"publish", "ch", "m"}, {"ping"},
			{"get"}, {"nosuch", "x"}, {"client", "list"}, {"zadd", "z", "1", "m"},
			{"sdiff", "a", "b"}, {"expire", "k", "10"}, {"incr", "n"}, {"append", "s", "x"},
		} {
			p.Do(append([]string{"COMMAND", sub}, c...)...)
		}
	}
}

// aclRules normalises the command rules of ACL LIST and GETUSER: Redis lists
// single commands in the order of its hash table, which changes with every
// start; lockserver in name order. Each run of single-command rules is
// sorted, so that the replies compare rule for rule; rules that name
// lockserver's own commands (SENTINEL, LOCKSERVER, ...), which Redis 7.0
// lacks, are left out, as are the bulk lengths that count them.
func (p *pair) aclRules(reply string) string {
	own := p.ownCommands()
	var out []string
	for _, line := range strings.Split(reply, "\r\n") {
		if strings.HasPrefix(line, "$") {
			line = "$"
		}
		toks := slices.DeleteFunc(strings.Split(line, " "), func(tok string) bool {
			return isCommandRule(tok) && own[strings.TrimSuffix(tok[1:], ")")]
		})
		for i := 0; i < len(toks); {
			j := i
			for j < len(toks) && isCommandRule(toks[j]) {
				j++
			}
			if j > i+1 {
				closing := strings.HasSuffix(toks[j-1], ")")
				toks[j-1] = strings.TrimSuffix(toks[j-1], ")")
				slices.Sort(toks[i:j])
				if closing {
					toks[j-1] += ")"
				}
			}
			i = max(j, i+1)
		}
		out = append(out, strings.Join(toks, " "))
	}
	return strings.Join(out, "\r\n")
}

func isCommandRule(tok string) bool {
	return len(tok) > 1 && (tok[0] == '+' || tok[0] == '-') && tok[1] != '@'
}

// aclDo compares ACL LIST and GETUSER replies normalised by aclRules.
func (p *pair) aclDo(args ...string) string { p.t.Helper(); return p.DoNorm(p.aclRules, args...) }

// ownCommands returns the commands and subcommands of lockserver that Redis
// 7.0 lacks.
func (p *pair) ownCommands() map[string]bool {
	own := map[string]bool{}
	for _, name := range strings.Split(listOf(p.ls.Do("COMMAND", "LIST")), "\n") {
		if lockserverOnly(p)(name) {
			own[name] = true
		}
	}
	return own
}

// TestDiffACLSetUser compares ACL SETUSER with redis-server's: its replies
// and errors, and the users it makes as ACL GETUSER and ACL LIST show them.
func TestDiffACLSetUser(t *testing.T) {
	p := newPair(t)
	for i, rules := range [][]string{
		{},
		{"reset"},
		{"on", ">p1", "~lock:*", "+@all", "-@dangerous", "(+get ~x)", "%R~r*", "&ch*"},
		{"on", "nopass", "allkeys", "allchannels", "allcommands"},
		{"+@read", "-get", "+set", "%W~w:*", "%R~r:*", "~both:*", "%RW~rw"},
		{"+@all", "-@all", "+client|list", "+select|0", "+select|1", "+config|get"},
		{"+@all", "-client", "+client|id", "-config|set"},
		{"+@write", "+@read", "-@string", "-@keyspace"},
		{"+@pubsub", "+@connection", "&news.*", "&alerts", "resetchannels", "&again"},
		{"+@hash", "+@list", "+@set", "+@sortedset", "+@scripting", "+@transaction"},
		{"+@fast", "-@write"},
		{"+@slow", "+@admin", "-@dangerous"},
		{"on", "#" + strings.Repeat("ab", 32), "<nope"},
		{"on", ">a", ">b", ">a", "<a"},
		{"on", ">x", "resetpass", "nopass", "resetpass"},
		{"skip-sanitize-payload", "sanitize-payload", "off", "on"},
		{"(~a +get)", "(&b +publish)", "clearselectors", "(%R~c", "+mget)"},
		{"+@all", "~*", "~x"},
		{"&*", "&x"},
		{"+nosuch"}, {"-@nosuch"}, {"+get|"}, {"+config|get|x"}, {"+config|nosuch"}, {"-get|x"},
		{"%~x"}, {"%RR~x"}, {"~a b"}, {"(~x", "foo)"}, {"(~x", "+get"}, {"#abc"}, {"!abc"}, {"bogus"},
		{"", "on", ""},
		{"ON", "NOPASS", "+GET", "~K", "ALLCHANNELS", "-@ALL", "+@READ"},
	} {
		name := fmt.Sprintf("u%d", i)
		p.Do(append([]string{"ACL", "SETUSER", name}, rules...)...)
		p.aclDo("ACL", "GETUSER", name)
		// Rules applied to a user that exists.
		p.Do("ACL", "SETUSER", name, "+ping", "~more")
		p.aclDo("ACL", "GETUSER", name)
	}
	p.aclDo("ACL", "LIST")
	p.Do("ACL", "USERS")
	p.Run([][]string{
		{"ACL", "SETUSER", "a b"},
		{"ACL", "SETUSER", "a\x00b"},
		{"ACL", "SETUSER"},
		{"ACL", "GETUSER", "nosuch"},
		{"ACL", "GETUSER"},
		{"ACL", "GETUSER", "a", "b"},
		{"ACL", "DELUSER", "u1", "u2", "nosuch"},
		{"ACL", "DELUSER", "u3", "default"},
		{"ACL", "DELUSER"},
		{"ACL", "USERS"},
		{"ACL", "NOSUCH"},
		{"ACL"},
		{"ACL", "HELP"},
		{"ACL", "WHOAMI"},
		{"ACL", "WHOAMI", "x"},
		{"ACL", "LIST", "x"},
		{"ACL", "GENPASS", "0"},
		{"ACL", "GENPASS", "4097"},
		{"ACL", "GENPASS", "x"},
		{"ACL", "GENPASS", "1", "2"},
		{"ACL", "LOG", "x"},
		{"ACL", "LOG", "1", "2"},
		{"ACL", "LOAD"},
		{"ACL", "SAVE"},
		{"ACL", "CAT", "read", "write"},
	})
	for _, bits := range []string{"1", "4", "5", "256", "4096"} {
		p.DoNorm(func(s string) string {
			return regexp.MustCompile(`[0-9a-f]+\r\n$`).ReplaceAllStringFunc(s, func(h string) string { return strconv.Itoa(len(h)) })
		},
			"ACL", "GENPASS", bits)
	}
	p.useRESP3()
	p.aclDo("ACL", "GETUSER", "u2")
	p.aclDo("ACL", "GETUSER", "u16")
}

// aclUsers sets up the same users on both servers for the permission tests.
func aclUsers(p *pair) {
	p.t.Helper()
	p.Run([][]string{
		{"ACL", "SETUSER", "locker", "on", ">pw", "~lock:*", "&lock:*", "+@all", "-@dangerous", "-keys"},
		{"ACL", "SETUSER", "reader", "on", ">pw", "%R~*", "%W~w:*", "+@read", "+@write", "+@scripting", "+@connection", "+@transaction", "-@dangerous"},
		{"ACL", "SETUSER", "picky", "on", "nopass", "+get", "+select|0", "+client|id", "+subscribe", "+psubscribe", "+publish", "+ssubscribe", "+spublish", "&news.*", "~k"},
		{"ACL", "SETUSER", "multi", "on", ">pw", "~a", "+get", "+mget", "(~b +mget +set)"},
		{"ACL", "SETUSER", "off", "off", ">pw", "+@all", "~*"},
		{"ACL", "SETUSER", "free", "on", "nopass", "+@all", "~*", "&*"},
	})
}

// TestDiffACLPermissions runs commands as users of every kind of
// restriction and compares the replies: Redis's NOPERM texts for commands,
// keys and channels, the first-argument and selector rules, MULTI, and
// ACL DRYRUN.
func TestDiffACLPermissions(t *testing.T) {
	p := newPair(t)
	aclUsers(p)
	run := func(user string, cmds [][]string) {
		q := p.another()
		q.Do("AUTH", user, "pw")
		q.Run(cmds)
		for _, c := range cmds {
			p.Do(append([]string{"ACL", "DRYRUN", user}, c...)...)
		}
	}
	run("locker", [][]string{
		{"SET", "lock:a", "1", "NX", "PX", "10000"}, {"GET", "lock:a"}, {"GET", "other"}, {"SET", "other", "1"},
		{"KEYS", "*"}, {"FLUSHALL"}, {"CONFIG", "GET", "maxmemory"}, {"CLIENT", "LIST"}, {"DEL", "lock:a", "other"},
		{"MSET", "lock:b", "1", "x", "2"}, {"PUBLISH", "lock:a", "m"}, {"PUBLISH", "other", "m"},
		{"EVAL", "return 1", "1", "lock:a"}, {"EVAL", "return 1", "1", "other"}, {"PING"}, {"ACL", "WHOAMI"},
		{"ACL", "SETUSER", "x"}, {"LMOVE", "lock:a", "b", "LEFT", "RIGHT"}, {"EXISTS", "lock:a", "zz"},
	})
	run("reader", [][]string{
		{"GET", "anything"}, {"SET", "anything", "1"}, {"SET", "w:1", "1"}, {"SET", "w:1", "1", "GET"},
		{"INCR", "w:1"}, {"DEL", "w:1"}, {"EXISTS", "x"}, {"COPY", "a", "w:b"}, {"COPY", "w:a", "b"},
		{"RENAME", "w:a", "w:b"}, {"EVAL", "return 1", "1", "w:x"}, {"EVAL_RO", "return 1", "1", "r"},
		{"EVAL", "return 1", "0"}, {"WATCH", "r"}, {"MGET", "a", "b"}, {"GETEX", "w:1"}, {"LPUSH", "w:l", "x"},
		{"FLUSHDB"}, {"SUBSCRIBE", "x"},
	})
	run("multi", [][]string{
		{"GET", "a"}, {"GET", "b"}, {"MGET", "a", "b"}, {"MGET", "b", "a"}, {"MGET", "b", "c"}, {"MGET", "c", "b", "a"},
		{"SET", "b", "1"}, {"SET", "a", "1"}, {"SET", "c", "1"},
	})
	q := p.another()
	q.Do("AUTH", "picky", "x")
	q.Run([][]string{
		{"GET", "k"}, {"GET", "j"}, {"SELECT", "0"}, {"SELECT", "1"}, {"CLIENT", "LIST"},
		{"PUBLISH", "news.1", "m"}, {"PUBLISH", "sports", "m"}, {"SPUBLISH", "news.2", "m"}, {"SPUBLISH", "x", "m"},
		{"PSUBSCRIBE", "news.x"},
	})
	q.Run([][]string{{"SUBSCRIBE", "news.1", "sports"}})
	q = p.another()
	q.Do("AUTH", "picky", "x")
	q.Run([][]string{{"PSUBSCRIBE", "news.*"}, {"SSUBSCRIBE", "news.2"}})
	// MULTI: a refused command fails EXEC.
	q = p.another()
	q.Do("AUTH", "locker", "pw")
	q.Run([][]string{{"MULTI"}, {"SET", "lock:m", "1"}, {"KEYS", "*"}, {"GET", "nope"}, {"EXEC"}})
	p.Run([][]string{
		{"ACL", "DRYRUN", "nosuch", "get", "x"},
		{"ACL", "DRYRUN", "locker", "nosuch"},
		{"ACL", "DRYRUN", "locker", "get"},
		{"ACL", "DRYRUN", "locker", "client", "nosuch"},
		{"ACL", "DRYRUN", "locker", "client", "kill", "id", "1"},
		{"ACL", "DRYRUN", "locker"},
	})
}

// TestDiffACLExecRecheck changes a user's rules between MULTI and EXEC: the
// commands no longer allowed are answered with Redis's NOPERM and do not
// run; the others do.
func TestDiffACLExecRecheck(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"ACL", "SETUSER", "tx", "on", ">pw", "~*", "&*", "+@all"},
	})
	q := p.another()
	q.Run([][]string{
		{"AUTH", "tx", "pw"}, {"MULTI"}, {"SET", "a", "1"}, {"GET", "a"}, {"PING"}, {"SET", "b", "2"}, {"PUBLISH", "c", "m"},
	})
	p.Do("ACL", "SETUSER", "tx", "-set", "resetchannels", "-@connection")
	q.Run([][]string{{"EXEC"}, {"GET", "b"}})
	p.Do("GET", "a")
	p.Do("GET", "b")
}

// TestDiffACLScripts runs scripts as restricted users: a redis.call the
// user may not make fails with Redis's text, redis.pcall returns it, and
// redis.acl_check_cmd answers for the user.
func TestDiffACLScripts(t *testing.T) {
	p := newPair(t)
	aclUsers(p)
	q := p.another()
	q.Do("AUTH", "locker", "pw")
	q.evalAllKeys([]string{
		"return redis.call('set', KEYS[1], 'v')",
		"return redis.call('set', 'other', 'v')",
		"return redis.pcall('get', 'other')",
		"return redis.call('keys', '*')",
		"return redis.pcall('flushall')",
		"return redis.call('publish', 'other', 'm')",
		"return redis.call('publish', 'lock:x', 'm')",
		"return redis.acl_check_cmd('get', 'other')",
		"return redis.acl_check_cmd('get', 'lock:a')",
		"return redis.acl_check_cmd('keys', '*')",
		"return redis.acl_check_cmd('publish', 'other', 'x')",
		"return redis.acl_check_cmd('nosuch')",
		"return redis.acl_check_cmd('set')",
		"return redis.acl_check_cmd('client', 'kill')",
	})
	q = p.another()
	q.Do("AUTH", "reader", "pw")
	q.evalAll([]string{
		"return redis.call('get', 'anything')",
		"return redis.call('set', 'anything', 'v')",
		"return redis.call('set', 'w:x', 'v')",
		"return redis.call('set', 'w:x', 'v', 'get')",
		"return redis.acl_check_cmd('set', 'w:x', 'v', 'get')",
		"return redis.acl_check_cmd('set', 'w:x', 'v')",
	})
	p.DoNorm(aclLogNorm, "ACL", "LOG")
}

// evalAllKeys runs each script with EVAL and KEYS[1] = lock:k on both servers.
func (p *pair) evalAllKeys(scripts []string) {
	p.t.Helper()
	for _, s := range scripts {
		p.Do("EVAL", s, "1", "lock:k")
	}
}

// aclLogNorm keeps of ACL LOG what does not differ by nature: it drops the
// age and the client's description (ids, addresses, buffers).
func aclLogNorm(s string) string {
	s = regexp.MustCompile(`(age-seconds\r\n)[$,][^\r]*\r\n([^\r]*\r\n)?`).ReplaceAllString(s, "${1}")
	return regexp.MustCompile(`(client-info\r\n)\$[0-9]+\r\n[^\r]*\r\n`).ReplaceAllString(s, "${1}")
}

// TestDiffACLAuth compares AUTH and HELLO AUTH with users: wrong passwords,
// users that are off or need no password, the default user's password set
// and unset through ACL SETUSER and CONFIG SET requirepass, and RESET.
func TestDiffACLAuth(t *testing.T) {
	p := newPair(t)
	aclUsers(p)
	q := p.another()
	q.Run([][]string{
		{"AUTH", "locker", "wrong"}, {"AUTH", "nosuch", "pw"}, {"AUTH", "off", "pw"}, {"AUTH", "free", "anything"},
		{"ACL", "WHOAMI"}, {"AUTH", "locker", "pw"}, {"ACL", "WHOAMI"}, {"AUTH", "a", "b", "c"},
		{"AUTH", "pw"}, {"RESET"}, {"ACL", "WHOAMI"},
		{"HELLO", "2", "AUTH", "locker", "nope"},
	})
	q.DoNorm(normID, "HELLO", "2", "AUTH", "picky", "x")
	q.Do("ACL", "WHOAMI")
	p.Do("ACL", "SETUSER", "default", "resetpass", ">secret")
	q = p.another()
	q.Run([][]string{
		{"GET", "x"}, {"ACL", "WHOAMI"}, {"HELLO", "2"}, {"AUTH", "wrong"}, {"AUTH", "secret"}, {"ACL", "WHOAMI"}, {"GET", "x"},
		{"CLIENT", "NO-EVICT", "on"},
		{"RESET"}, {"GET", "x"}, {"AUTH", "default", "secret"}, {"GET", "x"},
	})
	// The connection that set it is authenticated already, as in Redis.
	p.Do("GET", "x")
	p.Do("CONFIG", "SET", "requirepass", "other")
	q = p.another()
	q.Run([][]string{{"AUTH", "secret"}, {"AUTH", "other"}, {"GET", "x"}})
	p.aclDo("ACL", "GETUSER", "default")
	p.Do("CONFIG", "GET", "requirepass")
	p.Do("CONFIG", "SET", "requirepass", "")
	p.aclDo("ACL", "GETUSER", "default")
	q = p.another()
	q.Run([][]string{{"AUTH", "x"}, {"GET", "x"}})
	p.Do("ACL", "SETUSER", "default", "off")
	q = p.another()
	q.Run([][]string{{"GET", "x"}, {"AUTH", "default", "x"}, {"AUTH", "free", "x"}, {"GET", "x"}})
	p.Do("ACL", "SETUSER", "default", "on")
	// CLIENT INFO and LIST name each connection's user.
	userField := func(s string) string {
		return strings.Join(regexp.MustCompile(` user=[^ ]*`).FindAllString(s, -1), ",")
	}
	q = p.another()
	q.Do("AUTH", "free", "x")
	if got := q.DoNorm(userField, "CLIENT", "INFO"); got != " user=free" {
		t.Errorf("CLIENT INFO's user: %q", got)
	}
	// Redis's clientsCron rotates its list of clients, a few each tenth of a
	// second, so the order CLIENT LIST gives them in depends on when it
	// runs: the users are compared as a set.
	p.DoNorm(func(s string) string {
		users := strings.Split(userField(s), ",")
		slices.Sort(users)
		return strings.Join(users, ",")
	}, "CLIENT", "LIST")
	p.DoNorm(aclLogNorm, "ACL", "LOG")
	p.Do("ACL", "LOG", "RESET")
	p.Do("ACL", "LOG")
}

// closedBoth checks that both servers closed q's connections: a command
// sent gets no reply, only the end of the stream.
func closedBoth(q *pair) {
	q.t.Helper()
	q.Send("PING")
	if r, l := q.redis.ReadAll(), q.ls.ReadAll(); r != "" || l != "" {
		q.t.Errorf("a connection that should be closed answered:\n redis-server: %q\n   lockserver: %q", r, l)
	}
}

// TestDiffACLDelUser deletes users whose connections are open: Redis closes
// them, the one that deleted its own user after the reply.
func TestDiffACLDelUser(t *testing.T) {
	p := newPair(t)
	aclUsers(p)
	q := p.another()
	q.Do("AUTH", "locker", "pw")
	r := p.another()
	r.Do("AUTH", "free", "x")
	p.Do("ACL", "DELUSER", "locker")
	closedBoth(q)
	p.Do("PING") // the default user's connection is untouched
	r.Do("ACL", "DELUSER", "free")
	closedBoth(r)
	p.Do("ACL", "USERS")
}

// TestDiffACLPubSubRevoked takes channels away from a user whose subscribers
// are connected: Redis closes those subscribed to a channel or pattern no
// longer allowed, and keeps the others.
func TestDiffACLPubSubRevoked(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"ACL", "SETUSER", "sub", "on", ">pw", "+@all", "~*", "resetchannels", "&news.*", "&alerts"},
	})
	chans := p.another()
	chans.Do("AUTH", "sub", "pw")
	chans.Do("SUBSCRIBE", "news.1")
	pats := p.another()
	pats.Do("AUTH", "sub", "pw")
	pats.Do("PSUBSCRIBE", "news.*")
	shard := p.another()
	shard.Do("AUTH", "sub", "pw")
	shard.Do("SSUBSCRIBE", "alerts")
	idle := p.another()
	idle.Do("AUTH", "sub", "pw")
	// A superset of the channels: nobody is closed.
	p.Do("ACL", "SETUSER", "sub", "&more")
	p.Do("PUBLISH", "news.1", "m1")
	chans.Read()
	pats.Read()
	// news.1 stays allowed by a pattern, the pattern news.* no longer is as
	// a pattern, alerts no longer is.
	// Redis frees the closed subscribers before ACL SETUSER replies, so a
	// message published at once counts only those kept.
	p.Do("ACL", "SETUSER", "sub", "resetchannels", "&news.1")
	p.Do("PUBLISH", "news.1", "m2")
	chans.Read()
	chans.Do("PING")
	closedBoth(pats)
	closedBoth(shard)
	idle.Do("PING") // not a subscriber
}

// TestDiffACLFile loads users from an ACL file at start, saves them with ACL
// SAVE, and replaces them with ACL LOAD: the file Redis writes, its errors
// (the file named FILE), and the connections of the users replaced, which
// Redis closes.
func TestDiffACLFile(t *testing.T) {
	dir := t.TempDir()
	rfile, lfile := filepath.Join(dir, "redis.acl"), filepath.Join(dir, "lockserver.acl")
	write := func(text string) {
		for _, f := range []string{rfile, lfile} {
			if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("user default on nopass ~* &* +@all\nuser app on >pw ~app:* resetchannels +@all -@dangerous\n\nuser ro on #" + strings.Repeat("0", 64) + " %R~* +@read\n")
	raddr := startRedis(t, "--aclfile", rfile)
	s := startLockserver(t, lockserver.Options{ACLFile: lfile})
	p := &pair{t: t, redis: dialRaw(t, raddr), ls: dialRaw(t, s.Addr()), redisAddr: raddr, lockserver: s}
	norm := func(x string) string {
		x = strings.ReplaceAll(strings.ReplaceAll(x, rfile, "FILE"), lfile, "FILE")
		return regexp.MustCompile(`\$[0-9]+\r\n`).ReplaceAllString(p.aclRules(x), "$$")
	}
	p.aclDo("ACL", "LIST")
	p.DoNorm(norm, "CONFIG", "GET", "aclfile")
	app := p.another()
	app.Run([][]string{{"AUTH", "app", "pw"}, {"SET", "app:1", "v"}, {"SET", "other", "v"}})
	p.Do("ACL", "SETUSER", "new", "on", ">x", "~k", "+get", "(%W~w +set)")
	p.Do("ACL", "SAVE")
	rtext, _ := os.ReadFile(rfile)
	ltext, _ := os.ReadFile(lfile)
	if want, got := p.aclRules(strings.ReplaceAll(string(rtext), "\n", "\r\n")), p.aclRules(strings.ReplaceAll(string(ltext), "\n", "\r\n")); got != want {
		t.Errorf("ACL SAVE:\n redis-server %q\n   lockserver %q", want, got)
	}
	// A file with errors changes nothing.
	write("user app on +nosuch\nuser x on bogus\nfoo\nuser x\n")
	p.DoNorm(norm, "ACL", "LOAD")
	p.aclDo("ACL", "LIST")
	app.Do("GET", "app:1")
	// A good file replaces the users; app's connection is closed, though
	// app is in the new file too.
	write("user app on >pw2 ~* +@all\nuser other on nopass +ping\n")
	p.Do("ACL", "LOAD")
	p.aclDo("ACL", "LIST")
	closedBoth(app)
	p.Do("PING")
	q := p.another()
	q.Run([][]string{{"AUTH", "app", "pw"}, {"AUTH", "app", "pw2"}, {"GET", "x"}})
	os.Remove(rfile)
	os.Remove(lfile)
	p.DoNorm(norm, "ACL", "LOAD")
}

// TestDiffACLRedacted: the slow log keeps ACL SETUSER's rules, passwords
// among them, out, as Redis does.
func TestDiffACLRedacted(t *testing.T) {
	p := newPair(t)
	p.Run([][]string{
		{"CONFIG", "SET", "slowlog-log-slower-than", "0"},
		{"ACL", "SETUSER", "u", "on", ">secret", "~x", "+get"},
	})
	p.another().Do("AUTH", "u", "secret")
	if got := p.DoNorm(normSlow, "SLOWLOG", "GET", "2"); !strings.Contains(got, "(redacted)") {
		t.Errorf("SLOWLOG GET: %q", got)
	}
}
