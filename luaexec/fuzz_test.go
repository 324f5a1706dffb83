package luaexec

import (
	"encoding/binary"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/keyspace"
	lua "github.com/yuin/gopher-lua"
)

// replyFromBytes decodes fuzz input into a reply tree.
type replyGen struct{ b []byte }

func (g *replyGen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *replyGen) str() string {
	n := int(g.byte() % 8)
	var s []byte
	for i := 0; i < n; i++ {
		s = append(s, g.byte())
	}
	return string(s)
}

func (g *replyGen) u64() uint64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = g.byte()
	}
	return binary.LittleEndian.Uint64(buf[:])
}

func (g *replyGen) reply(depth int) keyspace.Reply {
	kind := keyspace.Kind(g.byte() % 14)
	if depth > 6 && (kind >= keyspace.KindArray && kind <= keyspace.KindSet || kind == keyspace.KindPush || kind == keyspace.KindPairs) {
		kind = keyspace.KindBulk
	}
	r := keyspace.Reply{Kind: kind}
	switch kind {
	case keyspace.KindStatus, keyspace.KindError, keyspace.KindBulk, keyspace.KindVerbatim:
		r.Str = g.str()
	case keyspace.KindInt:
		r.Int = int64(g.u64())
	case keyspace.KindBool:
		r.Int = int64(g.byte() % 2)
	case keyspace.KindDouble:
		r.Float = math.Float64frombits(g.u64())
	case keyspace.KindArray, keyspace.KindSet, keyspace.KindPush, keyspace.KindMap, keyspace.KindPairs:
		n := int(g.byte() % 5)
		if kind == keyspace.KindMap || kind == keyspace.KindPairs {
			n *= 2
		}
		r.Elems = []keyspace.Reply{}
		for i := 0; i < n; i++ {
			r.Elems = append(r.Elems, g.reply(depth+1))
		}
	}
	return r
}

// roundTrip is the documented result of a reply passed to a script and
// returned by it, written independently of convert.go from the table in
// its comment: RESP2 flattens maps, turns nulls into false (which returns as
// null), doubles into strings and booleans into 0 or 1; RESP3 keeps maps,
// sets, doubles and booleans, and a null inside an array ends the array
// (a nil in a Lua table); (member, score) pairs become two-element arrays in
// RESP3. Numbers pass through a double. ok reports whether
// the value exists at all (a RESP3 null inside a container does not).
func roundTrip(r keyspace.Reply, resp int) (keyspace.Reply, bool) {
	switch r.Kind {
	case keyspace.KindNull, keyspace.KindNullArray:
		return keyspace.Null, resp == 2
	case keyspace.KindStatus:
		return r, true
	case keyspace.KindError:
		code, msg := "ERR", r.Str
		if i := strings.IndexByte(r.Str, ' '); i >= 0 {
			code, msg = r.Str[:i], r.Str[i+1:]
		}
		return keyspace.Error(strings.TrimRight(code+" "+strings.Trim(msg, "\r\n"), "\r\n")), true
	case keyspace.KindInt:
		f := float64(r.Int)
		n := int64(math.MinInt64)
		if f < 1<<63 {
			n = int64(f)
		}
		return keyspace.Int(n), true
	case keyspace.KindBulk:
		return r, true
	case keyspace.KindDouble:
		if resp == 2 {
			return keyspace.Bulk(keyspace.FormatDouble(r.Float)), true
		}
		return r, true
	case keyspace.KindBool:
		if resp == 2 {
			return keyspace.Int(r.Int), true
		}
		return r, true
	case keyspace.KindVerbatim:
		if resp == 2 {
			return keyspace.Bulk(r.Str), true
		}
		return r, true
	case keyspace.KindMap:
		if resp == 3 {
			out := keyspace.Map()
			seen := map[string]int{}
			for i := 0; i+1 < len(r.Elems); i += 2 {
				k, kok := roundTrip(r.Elems[i], resp)
				v, vok := roundTrip(r.Elems[i+1], resp)
				if !kok {
					continue
				}
				id := luaKeyID(r.Elems[i], k, i)
				if j, dup := seen[id]; dup {
					out.Elems = append(out.Elems[:j], out.Elems[j+2:]...)
					for key, at := range seen {
						if at > j {
							seen[key] = at - 2
						}
					}
					delete(seen, id)
				}
				if vok {
					seen[id] = len(out.Elems)
					out.Elems = append(out.Elems, k, v)
				}
			}
			return out, true
		}
	case keyspace.KindPairs:
		if resp == 3 {
			out := keyspace.Array()
			for i := 0; i+1 < len(r.Elems); i += 2 {
				pair, _ := roundTrip(keyspace.Array(r.Elems[i], r.Elems[i+1]), resp)
				out.Elems = append(out.Elems, pair)
			}
			return out, true
		}
	case keyspace.KindSet:
		if resp == 3 {
			out := keyspace.Reply{Kind: keyspace.KindSet, Elems: []keyspace.Reply{}}
			seen := map[string]bool{}
			for i, e := range r.Elems {
				k, ok := roundTrip(e, resp)
				if id := luaKeyID(e, k, i); ok && !seen[id] {
					seen[id] = true
					out.Elems = append(out.Elems, k)
				}
			}
			return out, true
		}
	}
	out := keyspace.Array()
	for _, e := range r.Elems {
		x, ok := roundTrip(e, resp)
		if !ok {
			break
		}
		out.Elems = append(out.Elems, x)
	}
	return out, true
}

// luaKeyID identifies the Lua value a reply becomes as a table key: strings
// and numbers by value, every table (status, error, containers, RESP3
// doubles) as a distinct object.
func luaKeyID(orig, conv keyspace.Reply, pos int) string {
	switch orig.Kind {
	case keyspace.KindBulk:
		return "s" + orig.Str
	case keyspace.KindInt:
		return "n" + keyspace.FormatDouble(float64(orig.Int))
	case keyspace.KindBool:
		return "b" + show(conv)
	}
	return "t" + strings.Repeat("#", pos) + show(conv)
}

// canonical renders a reply with map entries and set elements sorted, since
// Lua tables do not keep their order.
func canonical(r keyspace.Reply) string {
	switch r.Kind {
	case keyspace.KindMap:
		var pairs []string
		for i := 0; i+1 < len(r.Elems); i += 2 {
			pairs = append(pairs, canonical(r.Elems[i])+"=>"+canonical(r.Elems[i+1]))
		}
		sort.Strings(pairs)
		return "%{" + strings.Join(pairs, ", ") + "}"
	case keyspace.KindSet:
		var elems []string
		for _, e := range r.Elems {
			elems = append(elems, canonical(e))
		}
		sort.Strings(elems)
		return "~[" + strings.Join(elems, ", ") + "]"
	case keyspace.KindArray:
		var elems []string
		for _, e := range r.Elems {
			elems = append(elems, canonical(e))
		}
		return "[" + strings.Join(elems, ", ") + "]"
	}
	return show(r)
}

// FuzzConvert passes random reply trees through both conversions, as a
// script that returns what redis.call gave it does, and checks the result
// against the documented form. No input may panic.
func FuzzConvert(f *testing.F) {
	f.Add([]byte{byte(keyspace.KindArray), 3, byte(keyspace.KindInt), 1, 0, 0, 0, 0, 0, 0, 0, byte(keyspace.KindNull), byte(keyspace.KindBulk), 2, 'h', 'i'})
	f.Add([]byte{byte(keyspace.KindMap), 2, byte(keyspace.KindBulk), 1, 'k', byte(keyspace.KindDouble), 0, 0, 0, 0, 0, 0, 0xf8, 0x3f})
	f.Add([]byte{byte(keyspace.KindSet), 3, byte(keyspace.KindBulk), 1, 'a', byte(keyspace.KindBulk), 1, 'a', byte(keyspace.KindBool), 1})
	f.Add([]byte{byte(keyspace.KindError), 5, 'E', ' ', 'x', '\r', '\n'})
	e := New(keyspace.New(), Options{})
	v := e.machine()
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &replyGen{b: data}
		r := g.reply(0)
		for _, resp := range []int{2, 3} {
			// Convert inside a protected call with a budget, as redis.call does:
			// integer keys far apart cost steps (gopher-lua fills the gaps).
			v.run = &v.current
			v.current = run{steps: defaultBudget}
			var val lua.LValue
			L := v.L
			L.Push(L.NewFunction(func(L *lua.LState) int {
				val = v.toLua(L, r, resp)
				return 0
			}))
			err := L.PCall(0, 0, nil)
			v.run = nil
			if err != nil {
				if !v.current.exhausted {
					t.Fatalf("converting %s: %v", show(r), err)
				}
				continue
			}
			got := v.toReply(val, resp, defaultBudget)
			want, ok := roundTrip(r, resp)
			if !ok {
				want = keyspace.Null
			}
			if canonical(got) != canonical(want) {
				t.Fatalf("RESP%d %s\n got: %s\nwant: %s", resp, show(r), canonical(got), canonical(want))
			}
		}
		v.L.SetTop(0)
	})
}

// FuzzCompile feeds script bodies to the compiler (EVAL's parser, the
// rewrites of the parsed chunk, gopher-lua's compiler). It must never panic
// or run unbounded, and a body that compiles must run twice to the same
// reply within a small budget: scripts run inside the replicated state
// machine, where every member must get the same result.
func FuzzCompile(f *testing.F) {
	for _, name := range []string{"compare_and_delete.lua", "fixed_key_unlock.lua", "redisson_lock.lua", "redisson_unlock_v2.lua", "reentrant_lock.lua"} {
		f.Add(lockscripts.MustSource(f, name))
	}
	for _, s := range []string{
		"return 1", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "for i = '1', 3 do end return i",
		"local t = {} for i = 1, 10 do t[#t+1] = i end return t", "while true do end",
		"return string.rep('x', 100):upper()", "goto = 1", "return cjson.encode({1, {a = 'b'}})",
		"local function f(n) if n == 0 then return 0 end return f(n - 1) end return f(50)",
		"return redis.pcall('set', 'k', 'v', 'px', 10)", "return {err = 'x'}", "x x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if _, msg := compileScript(sha1hex(body), body, 200_000); msg != "" {
			return
		}
		var replies [2]keyspace.Reply
		for i := range replies {
			h := newHarness(t, Options{Budget: 20_000})
			replies[i] = h.eval(body)
		}
		if !reflect.DeepEqual(replies[0], replies[1]) {
			t.Fatalf("two runs differ:\n%+v\n%+v", replies[0], replies[1])
		}
	})
}
