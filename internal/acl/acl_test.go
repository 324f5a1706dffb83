package acl

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

func ops(s ...string) [][]byte {
	b := make([][]byte, len(s))
	for i, x := range s {
		b[i] = []byte(x)
	}
	return b
}

func mustSet(t *testing.T, u *User, name string, rules ...string) *User {
	t.Helper()
	u, err := SetUser(u, name, ops(rules...))
	if err != nil {
		t.Fatalf("SetUser %q: %v", rules, err)
	}
	return u
}

// The descriptions below are redis-server 7.0.15's ACL LIST for the same
// rules.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		rules []string
		want  string
	}{
		{nil, "off resetchannels -@all"},
		{[]string{"reset"}, "off sanitize-payload resetchannels -@all"},
		{[]string{"on", ">p1", "~lock:*", "+@all", "-@dangerous", "(+get ~x)", "%R~r*", "&ch*"},
			"on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a ~lock:* %R~r* resetchannels &ch* +@all -@dangerous (~x resetchannels -@all +get)"},
		{[]string{"%R~", "%W"}, "off ~ resetchannels -@all"},
		{[]string{"allkeys", "allchannels", "allcommands", "nopass", "on", "skip-sanitize-payload"}, "on nopass skip-sanitize-payload ~* &* +@all"},
		{[]string{"+@read", "-get"}, "off resetchannels -@all +@read -get"},
		{[]string{"+get", "+set"}, "off resetchannels -@all +get +set"},
		{[]string{"+@all", "-@all", "+client|list", "+select|0"}, "off resetchannels -@all +client|list +select|0"},
		{[]string{"+@all", "-client", "+client|id"}, "off resetchannels +@all -client +client|id"},
		{[]string{"~a", "%W~a", "%R~b", "%RW~c"}, "off ~a %R~b ~c resetchannels -@all"},
	} {
		u := mustSet(t, nil, "u", c.rules...)
		if got := u.Describe(); got != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.rules, got, c.want)
		}
	}
	if got := NewDefault().Describe(); got != "on nopass ~* &* +@all" {
		t.Errorf("default user: %q", got)
	}
}

// The errors are redis-server 7.0.15's replies to ACL SETUSER.
func TestSetUserErrors(t *testing.T) {
	for _, c := range []struct {
		rules []string
		want  string
	}{
		{[]string{"+nosuch"}, "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"},
		{[]string{"-@nosuch"}, "Error in ACL SETUSER modifier '-@nosuch': Unknown command or category name in ACL"},
		{[]string{"foo"}, "Error in ACL SETUSER modifier 'foo': Syntax error"},
		{[]string{"~*", "~x"}, "Error in ACL SETUSER modifier '~x': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"},
		{[]string{"&*", "&x"}, "Error in ACL SETUSER modifier '&x': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"},
		{[]string{"<nope"}, "Error in ACL SETUSER modifier '<nope': The password you are trying to remove from the user does not exist"},
		{[]string{"#abc"}, "Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"},
		{[]string{"+config|get|x"}, "Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported"},
		{[]string{"+get|"}, "Error in ACL SETUSER modifier '+get|': Syntax error"},
		{[]string{"+config|nosuch"}, "Error in ACL SETUSER modifier '+config|nosuch': Unknown command or category name in ACL"},
		{[]string{"-get|x"}, "Error in ACL SETUSER modifier '-get|x': Unknown command or category name in ACL"},
		{[]string{"%~foo"}, "Error in ACL SETUSER modifier '%~foo': Syntax error"},
		{[]string{"%RR~x"}, "Error in ACL SETUSER modifier '%RR~x': Syntax error"},
		{[]string{"(~x", "foo)"}, "Error in ACL SETUSER modifier '(~x foo)': Syntax error"},
		{[]string{"(~x", "+get"}, "Unmatched parenthesis in acl selector starting at '(~x'."},
		{[]string{"~a b"}, "Error in ACL SETUSER modifier '~a b': Syntax error"},
	} {
		_, err := SetUser(nil, "u", ops(c.rules...))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v\nwant %s", c.rules, err, c.want)
		}
	}
}

// sameUser compares what two users allow and describe.
func sameUser(t *testing.T, a, b *User) {
	t.Helper()
	if a.Describe() != b.Describe() {
		t.Fatalf("descriptions differ:\n%q\n%q", a.Describe(), b.Describe())
	}
	if len(a.selectors) != len(b.selectors) {
		t.Fatalf("%d selectors, %d", len(a.selectors), len(b.selectors))
	}
	for i := range a.selectors {
		for id := range numBits {
			if a.selectors[i].commands.has(id) != b.selectors[i].commands.has(id) {
				t.Fatalf("selector %d: command %d differs (%q)", i, id, a.Describe())
			}
		}
	}
}

// reload builds a user anew from its description, as ACL LOAD reads ACL
// SAVE's file.
func reload(u *User) (*User, error) {
	users, err := ParseFile(File([]*User{u}), "f")
	if err != nil {
		return nil, err
	}
	return users[0], nil
}

func TestDescriptionRoundTrip(t *testing.T) {
	for _, rules := range [][]string{
		{"on", ">a", ">b", "~x*", "%R~y", "&c", "+@all", "-@write", "+set", "(%W~w -@all +@hash)", "(&q +publish)"},
		{"+@read", "+@write", "-@string", "+client|kill", "-client|list", "+select|1", "+select|2"},
		{"+@all", "-@dangerous", "-@slow", "+config|get"},
		{"-@all", "+@pubsub", "+@connection", "-ping"},
		{"nopass", "skip-sanitize-payload", "allkeys", "resetchannels", "+@fast"},
	} {
		u := mustSet(t, nil, "u", rules...)
		again, err := reload(u)
		if err != nil {
			t.Fatalf("%q: reload: %v", rules, err)
		}
		sameUser(t, u, again)
		users, seeded, err := Decode(NewRegistry(u).Encode())
		if err != nil || seeded {
			t.Fatalf("decode: %v %v", err, seeded)
		}
		i := slices.IndexFunc(users, func(x *User) bool { return x.name == "u" })
		sameUser(t, u, users[i])
	}
}

func TestCheck(t *testing.T) {
	get, set, publish, psub := keyspace.Lookup([]byte("get")), keyspace.Lookup([]byte("set")), keyspace.Lookup([]byte("publish")), keyspace.Lookup([]byte("psubscribe"))
	eval, ping := keyspace.Lookup([]byte("eval")), keyspace.Lookup([]byte("ping"))
	u := mustSet(t, nil, "u", "on", "+get", "+set", "+publish", "+psubscribe", "+eval", "%R~r:*", "%W~w:*", "~lock:*", "&news.*")
	for _, c := range []struct {
		cmd  *keyspace.Command
		args []string
		want Verdict
	}{
		{get, []string{"get", "r:1"}, Verdict{}},
		{get, []string{"get", "w:1"}, Verdict{DeniedKey, 1}},
		{set, []string{"set", "w:1", "v"}, Verdict{}},                    // OW|UPDATE: write only
		{set, []string{"set", "w:1", "v", "GET"}, Verdict{DeniedKey, 1}}, // GET reads too
		{set, []string{"set", "lock:1", "v", "get"}, Verdict{}},
		{set, []string{"set", "r:1", "v"}, Verdict{DeniedKey, 1}},
		{ping, []string{"ping"}, Verdict{DeniedCommand, 0}},
		{publish, []string{"publish", "news.x", "m"}, Verdict{}},
		{publish, []string{"publish", "other", "m"}, Verdict{DeniedChannel, 1}},
		{psub, []string{"psubscribe", "news.*"}, Verdict{}},
		{psub, []string{"psubscribe", "news.x"}, Verdict{DeniedChannel, 1}}, // a pattern must be listed as is
		{eval, []string{"eval", "s", "2", "lock:a", "r:b"}, Verdict{DeniedKey, 4}},
		{eval, []string{"eval", "s", "1", "lock:a", "r:b"}, Verdict{}},
		{eval, []string{"eval", "s", "x", "zzz"}, Verdict{}}, // a bad count names no key
	} {
		args := ops(c.args...)
		if got := u.Check(c.cmd.Resolve(args), args); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.args, got, c.want)
		}
	}
	// The worst verdict of all selectors, the key furthest in the command line.
	v := mustSet(t, nil, "v", "+mget", "~a", "(~b +mget)")
	args := ops("mget", "a", "b")
	if got := v.Check(keyspace.Lookup(args[0]), args); got != (Verdict{DeniedKey, 2}) {
		t.Errorf("two selectors: %+v", got)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	var changes []Change
	r.OnChange(func(c Change) { changes = append(changes, c) })
	if err := r.SetUser([]byte("alice"), ops("on", ">secret", "+get", "~k")); err != nil {
		t.Fatal(err)
	}
	if r.Authenticate([]byte("alice"), []byte("secret")) == nil || r.Authenticate([]byte("alice"), []byte("wrong")) != nil {
		t.Fatal("password check")
	}
	slot := r.Lookup([]byte("alice"))
	r.SetUser([]byte("alice"), ops("off"))
	if r.Authenticate([]byte("alice"), []byte("secret")) != nil {
		t.Fatal("a user that is off authenticated")
	}
	if len(changes) != 1 || changes[0].Updated[0].Slot != slot {
		t.Fatalf("changes %+v", changes)
	}
	if _, err := r.DelUsers(ops("alice", "default")); err != ErrDeleteDefault {
		t.Fatalf("deleting default: %v", err)
	}
	if n, _ := r.DelUsers(ops("alice", "bob")); n != 1 || slot.User().Check(keyspace.Lookup([]byte("get")), ops("get", "k")).Reason != DeniedCommand {
		t.Fatalf("deleted %d; its slot still allows", n)
	}
	if err := r.SetUser([]byte("a b"), nil); err == nil || err.Error() != "Usernames can't contain spaces or null characters" {
		t.Fatalf("name with a space: %v", err)
	}
	users, err := ParseFile([]byte("user default on >x ~* +@all\n\nuser carol on nopass +ping\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	def := r.Default()
	r.Load(users, true)
	if r.Default() != def || r.Authenticate([]byte("default"), []byte("x")) == nil || r.Get([]byte("carol")) == nil || !r.Seeded() {
		t.Fatal("load")
	}
}

// The errors are redis-server 7.0.15's replies to ACL LOAD of the same file,
// named f.acl.
func TestParseFileErrors(t *testing.T) {
	_, err := ParseFile([]byte("user a on +nosuch foo bar\nfoo\nuser a\nuser b (~x\n"), "f.acl")
	want := "f.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. f.acl:1: Syntax error. f.acl:2 should start with user keyword followed by the username. WARNING: Duplicate user 'a' found on line 3. f.acl:4: Unmatched parenthesis in selector definition.WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`a b  c`, []string{"a", "b", "c"}, true},
		{`"a b" 'c d'`, []string{"a b", "c d"}, true},
		{`"\x41\n" 'it\'s'`, []string{"A\n", "it's"}, true},
		{`"a"b`, nil, false},
		{`"abc`, nil, false},
		{``, nil, true},
	} {
		got, ok := SplitArgs([]byte(c.in))
		if ok != c.ok || !slices.EqualFunc(got, ops(c.want...), bytes.Equal) {
			t.Errorf("%q: %q %v", c.in, got, ok)
		}
	}
}

func TestLog(t *testing.T) {
	l := NewLog(2)
	now := time.Now()
	l.Add(LogEntry{Reason: DeniedKey, Context: ContextTopLevel, Object: "k", Username: "u", Time: now})
	l.Add(LogEntry{Reason: DeniedKey, Context: ContextTopLevel, Object: "k", Username: "u", Time: now.Add(time.Second), ClientInfo: "2nd"})
	if e := l.Entries(10); len(e) != 1 || e[0].Count != 2 || e[0].ClientInfo != "2nd" {
		t.Fatalf("grouping: %+v", e)
	}
	l.Add(LogEntry{Reason: DeniedKey, Context: ContextTopLevel, Object: "k", Username: "u", Time: now.Add(2 * time.Minute)})
	l.Add(LogEntry{Reason: DeniedCommand, Context: ContextMulti, Object: "get", Username: "u", Time: now})
	e := l.Entries(10)
	if len(e) != 2 || e[0].Object != "get" || e[1].Count != 1 {
		t.Fatalf("a minute apart, a new entry; at most max: %+v", e)
	}
	if strings.Contains(e[0].Context, "top") {
		t.Fatal(e[0].Context)
	}
}
