package luaexec

import (
	"fmt"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// The two conversions between Redis replies and Lua values, as Redis 7.0's
// script_lua.c defines them. These are the only ones in the project.
//
// Redis -> Lua (what redis.call returns), by the protocol the script chose
// with redis.setresp (2 unless it called setresp(3)):
//
//	reply          RESP2                 RESP3
//	integer        number                number
//	bulk           string                string
//	status         {ok=s}                {ok=s}
//	error          {err=s}               {err=s}
//	null, null arr false                 nil
//	array          array                 array
//	map            flat array k,v,...    {map={[k]=v}}
//	set            array                 {set={[e]=true}}
//	double         string ("1.5")        {double=1.5}
//	boolean        number 1 or 0         true or false
//	verbatim       string                {verbatim_string={format='txt', string=s}}
//	(member,score) flat array            array of {member, {double=score}}
//
// Lua -> Redis (what the client receives):
//
//	string -> bulk; number -> integer truncated toward zero (3.99 -> 3,
//	-3.99 -> -3, NaN and out of range -> -9223372036854775808 as C's cast);
//	true -> 1 and false -> null, or RESP3 booleans after setresp(3);
//	nil -> null; a table with a string err -> error reply (trailing CR/LF
//	removed), with a string ok -> status, with a number double -> double, with
//	a table map -> map, with a table set -> set (its keys), otherwise an
//	array of the values at 1, 2, ... up to the first nil.

// toLua converts a command's reply for the script.
func (v *vm) toLua(L *lua.LState, r keyspace.Reply, resp int) lua.LValue {
	switch r.Kind {
	case keyspace.KindNull, keyspace.KindNullArray:
		if resp == 3 {
			return lua.LNil
		}
		return lua.LFalse
	case keyspace.KindStatus:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case keyspace.KindError:
		return commandErrorTable(L, r.Str)
	case keyspace.KindInt:
		return intValue(r.Int)
	case keyspace.KindBulk:
		return lua.LString(r.Str)
	case keyspace.KindArray, keyspace.KindPush:
		return v.arrayToLua(L, r.Elems, resp)
	case keyspace.KindMap:
		if resp == 2 {
			return v.arrayToLua(L, r.Elems, resp)
		}
		m := L.CreateTable(0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			k := v.toLua(L, r.Elems[i], resp)
			if k == lua.LNil {
				continue // Lua tables cannot hold a nil key
			}
			v.chargeGap(L, m, k)
			m.RawSet(k, v.toLua(L, r.Elems[i+1], resp))
		}
		return wrap(L, "map", m)
	case keyspace.KindSet:
		if resp == 2 {
			return v.arrayToLua(L, r.Elems, resp)
		}
		s := L.CreateTable(0, len(r.Elems))
		for _, e := range r.Elems {
			if k := v.toLua(L, e, resp); k != lua.LNil {
				v.chargeGap(L, s, k)
				s.RawSet(k, lua.LTrue)
			}
		}
		return wrap(L, "set", s)
	case keyspace.KindPairs:
		if resp == 2 {
			return v.arrayToLua(L, r.Elems, resp)
		}
		t := L.CreateTable(len(r.Elems)/2, 0)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			t.Append(v.arrayToLua(L, r.Elems[i:i+2], resp))
		}
		return t
	case keyspace.KindDouble:
		if resp == 2 {
			return lua.LString(r.DoubleText())
		}
		return wrap(L, "double", lua.LNumber(r.Float))
	case keyspace.KindBool:
		if resp == 2 {
			return intValue(r.Int)
		}
		return lua.LBool(r.Int != 0)
	case keyspace.KindVerbatim:
		if resp == 2 {
			return lua.LString(r.Str)
		}
		t := L.CreateTable(0, 2)
		t.RawSetString("format", lua.LString("txt"))
		t.RawSetString("string", lua.LString(r.Str))
		return wrap(L, "verbatim_string", t)
	}
	return lua.LFalse
}

// boxedInts are the integers from minBoxed up, already boxed as Lua values:
// putting a number in an interface allocates, and most integer replies
// (EXISTS, HEXISTS, PEXPIRE, counters, TTL's -2 and -1) are small.
var boxedInts = func() (b [1024]lua.LValue) {
	for i := range b {
		b[i] = lua.LNumber(i + minBoxed)
	}
	return b
}()

const minBoxed = -2

// intValue returns n as a Lua number.
func intValue(n int64) lua.LValue {
	if i := n - minBoxed; i >= 0 && i < int64(len(boxedInts)) {
		return boxedInts[i]
	}
	return lua.LNumber(n)
}

func (v *vm) arrayToLua(L *lua.LState, elems []keyspace.Reply, resp int) *lua.LTable {
	t := L.CreateTable(len(elems), 0)
	for i, e := range elems {
		// RESP3 nulls leave holes, as lua_settable with a nil value does.
		if x := v.toLua(L, e, resp); x != lua.LNil {
			t.RawSetInt(i+1, x)
		}
	}
	return t
}

// wrap returns {[key]=value}.
func wrap(L *lua.LState, key string, value lua.LValue) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString(key, value)
	return t
}

// errorText normalises an error text as Redis's luaPushErrorBuff does: a
// text starting with '-' is "-CODE message" (CODE is ERR when there is no
// space); any other text is a message with the code ERR. Surrounding CR and
// LF are removed from the message.
func errorText(s string) string {
	code, msg := "ERR", s
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		msg = rest
		if c, m, found := strings.Cut(rest, " "); found {
			code, msg = c, m
		}
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

// errorTable returns {err=text} for an error the script library raises or
// returns (redis.error_reply, argument errors).
func errorTable(L *lua.LState, text string) *lua.LTable {
	return wrap(L, "err", lua.LString(errorText(text)))
}

// commandErrorTable returns the table for an error reply of a command run
// by redis.call or redis.pcall. Redis marks those with
// ignore_error_stats_update, which scripts can see: the call counted the
// error, and the script's reply, if it is that table, is not counted again.
func commandErrorTable(L *lua.LState, text string) *lua.LTable {
	t := errorTable(L, "-"+text)
	t.RawSetString(ignoreErrorStats, lua.LTrue)
	return t
}

const ignoreErrorStats = "ignore_error_stats_update"

// statsCounted reports whether an error table is one the error statistics
// counted already: Redis goes by its ignore_error_stats_update field, which
// a script may also set or clear.
func statsCounted(t *lua.LTable) bool { return t.RawGetString(ignoreErrorStats) == lua.LTrue }

// Redis converts a script's result while it sits on the Lua stack and gives
// up ("reached lua stack limit") where a nested value would not fit in the
// slots of that stack (lualib.MaxCStack). The conversion counts the slots
// Redis's code would use, so that the same nesting fails at the same place.
const resultSlots = 2 // the error handler and the result itself

// toReply converts a script's result for the client. Building the reply,
// which the server then writes out, is work like building any string: it is
// charged a step for each budget.BytesPerStep bytes of its strings and one
// for each value, against the steps the script has left (steps). A reply that
// does not fit is not built further, and the script fails with
// errReplyTooLarge: a script's reply is bounded as all its work is.
func (v *vm) toReply(val lua.LValue, resp int, steps int64) keyspace.Reply {
	b := replyBuilder{resp: resp, left: steps}
	r := b.value(val, resultSlots)
	if b.left < 0 {
		return keyspace.Error(fmt.Sprintf(errReplyTooLarge, v.e.budget()))
	}
	return r
}

const errReplyTooLarge = "ERR Script reply too large: building it exceeded the script's execution budget of %d steps (one a value, one for 16 bytes)"

// replyBuilder converts a script's result, counting what it builds.
type replyBuilder struct {
	resp int
	left int64 // steps
}

// tableProbe is what a table in a reply costs beyond its values, counted as
// bytes: the seven fields (err, ok, map, ...) looked up to tell its kind.
const tableProbe = 4 * budget.BytesPerStep

// spend charges one value of n bytes and reports whether the budget allows it.
func (b *replyBuilder) spend(n int) bool {
	b.left -= 1 + int64(n)/budget.BytesPerStep
	return b.left >= 0
}

func (b *replyBuilder) value(val lua.LValue, slots int) keyspace.Reply {
	if slots+4 > lualib.MaxCStack {
		return keyspace.Error("ERR reached lua stack limit")
	}
	switch x := val.(type) {
	case lua.LString:
		if !b.spend(len(x)) {
			return keyspace.Null
		}
		return keyspace.Bulk(string(x))
	case lua.LBool:
		b.spend(0)
		if b.resp == 3 {
			return keyspace.Reply{Kind: keyspace.KindBool, Int: boolInt(bool(x))}
		}
		if x {
			return keyspace.One
		}
		return keyspace.Null
	case lua.LNumber:
		b.spend(0)
		return keyspace.Int(clib.ToInteger(float64(x)))
	case *lua.LTable:
		if !b.spend(tableProbe) {
			return keyspace.Null
		}
		return b.table(x, slots)
	}
	return keyspace.Null
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// str charges a string of a table reply (err, ok, ...).
func (b *replyBuilder) str(s lua.LString) string {
	b.spend(len(s))
	return string(s)
}

func (b *replyBuilder) table(t *lua.LTable, slots int) keyspace.Reply {
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		msg := strings.TrimRight(b.str(s), "\r\n")
		if statsCounted(t) {
			return keyspace.CountedError(msg)
		}
		return keyspace.Error(msg)
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		return keyspace.Status(b.str(s))
	}
	if n, ok := t.RawGetString("double").(lua.LNumber); ok {
		return keyspace.Double(float64(n))
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		// keyspace has no big number kind: the RESP2 form, a bulk string.
		return keyspace.Bulk(strings.NewReplacer("\r", " ", "\n", " ").Replace(b.str(s)))
	}
	if vs, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		if _, ok := vs.RawGetString("format").(lua.LString); ok {
			if s, ok := vs.RawGetString("string").(lua.LString); ok {
				return keyspace.Reply{Kind: keyspace.KindVerbatim, Str: b.str(s)}
			}
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		elems := []keyspace.Reply{}
		lualib.ForEach(m, func(k, val lua.LValue) bool {
			elems = append(elems, b.value(k, slots+4), b.value(val, slots+3))
			return b.left >= 0
		})
		return keyspace.Map(elems...)
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		elems := []keyspace.Reply{}
		lualib.ForEach(s, func(k, _ lua.LValue) bool {
			elems = append(elems, b.value(k, slots+3))
			return b.left >= 0
		})
		return keyspace.Reply{Kind: keyspace.KindSet, Elems: elems}
	}
	elems := []keyspace.Reply{}
	for i := 1; b.left >= 0; i++ {
		e := t.RawGetInt(i)
		if e == lua.LNil {
			break
		}
		elems = append(elems, b.value(e, slots+1))
	}
	return keyspace.Array(elems...)
}
