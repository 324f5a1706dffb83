package compat_test

import (
	"strings"
	"testing"
)

// KEYS and ARGV are fresh on every call on redis-server, whatever the last
// script did to its own; lockserver reuses the tables when it can, so check
// after every kind of change, with as many, fewer and more arguments.
func TestDiffScriptKeysAndArgvFresh(t *testing.T) {
	const probe = `local out = {}
for i = 1, 6 do out[#out + 1] = tostring(KEYS[i]) .. '/' .. tostring(ARGV[i]) end
out[#out + 1] = tostring(getmetatable(KEYS) == nil) .. ' ' .. tostring(getmetatable(ARGV) == nil)
out[#out + 1] = #KEYS .. ' ' .. #ARGV .. ' ' .. tostring(KEYS.name) .. ' ' .. tostring(rawget(ARGV, 'name'))
local n = 0 for _ in pairs(KEYS) do n = n + 1 end for _ in pairs(ARGV) do n = n + 1 end
out[#out + 1] = n
return out`
	dirty := []string{
		"KEYS[1] = 'changed' ARGV[1] = 'changed' return 1",
		"KEYS[2] = nil ARGV[1] = nil return 1",
		"KEYS[5] = 'gap' ARGV[2] = 'extra' return 1",
		"table.insert(KEYS, 'more') table.insert(ARGV, 1, 'first') return 1",
		"table.remove(KEYS) table.remove(ARGV) return 1",
		"KEYS.name = 'x' ARGV.name = 'x' return 1",
		"KEYS.name = 'x' KEYS.name = nil return 1",
		"setmetatable(KEYS, {__index = function() return 'meta' end}) setmetatable(ARGV, {__index = KEYS}) return 1",
		"return redis.call('set', KEYS[1], ARGV[1])",
	}
	calls := [][]string{
		{"2", "k1", "k2", "a1"},
		{"2", "k1", "k2", "a1"},
		{"1", "k1"},
		{"3", "k1", "other", "k3", "a1", "a2"},
		{"0"},
		{"0", "a1", "a2", "a3"},
		{"2", "k2", "k1", "a3", "a1", "k1"},
	}
	p := newPair(t)
	for _, d := range dirty {
		for _, before := range calls {
			for _, c := range calls {
				p.Do(append([]string{"EVAL", d}, before...)...)
				p.Do(append([]string{"EVAL", probe}, c...)...)
			}
		}
	}
}

// Scripts read the globals the VM defines as upvalues; the globals must
// behave as on redis-server all the same: shadowed by locals, refused on
// assignment, named in messages, and KEYS and ARGV those of each call, also
// in nested functions, coroutines and loaded chunks.
func TestDiffScriptGlobalsAsUpvalues(t *testing.T) {
	p := newPair(t)
	p.evalAll([]string{
		"redis = nil return 1",
		"KEYS = {} return 1",
		"tostring = 1 return 1",
		"function redis() end return 1",
		"function pairs() end return 1",
		"local t = {} t.x, redis = 1, 2 return t.x",
		"local t = {} redis, t[1 + 1] = 1, 2 return t[2]",
		"redis, ARGV = 1, 2",
		"local redis = {call = function() return 'mine' end} return redis.call()",
		"local KEYS = {'mine'} return KEYS[1]",
		"local function f(tostring) return tostring end return f('shadowed')",
		"do local type = 'x' end return type(1)",
		"return tostring()",
		"return tonumber()",
		"return string.rep()",
		"return redis.call()",
		"return setmetatable(1, {})",
		"return ipairs()",
		"local ok, e = pcall(tostring, setmetatable({}, {__tostring = function() return 1 end})) return {ok, e}",
		"return select('#', unpack({1, 2, 3}))",
		"return _G.redis == redis and _G.KEYS == KEYS and rawget(_G, 'ARGV') == ARGV",
		"return _G._G == _G and _VERSION",
		"return type(getmetatable(_G).__index)",
		"return {pcall(function() redis.call = nil end)}",
		"redis.call = nil return 1",
		"redis.pcall, redis.call = 1, 2 return 1",
		"local t = {} t.x, redis.call = 1, 2 return t.x",
		"function redis.call() end return 1",
		"local c = redis.call return c('ping')",
		"return {redis.call == redis.pcall, type(redis.pcall), redis.pcall('nosuch').err}",
		"local redis = {call = function(x) return x end} return redis.call('shadowed')",
		"return redis.call('get')",
		"return {pcall(function() string.rep = nil end)}",
	})
	const reader = `local function nested() return KEYS[1] .. ARGV[1] end
local co = coroutine.wrap(function() coroutine.yield(KEYS[2] or '-') end)
return {nested(), co(), loadstring('return KEYS[1] .. (ARGV[2] or "-")')(), #KEYS, #ARGV}`
	sha := p.Do("SCRIPT", "LOAD", reader)
	sha = strings.TrimSpace(sha[strings.Index(sha, "\n")+1:])
	for _, args := range [][]string{
		{"1", "k1", "a1"},
		{"2", "k2", "k3", "a2", "a3"},
		{"1", "k4", "a4"},
	} {
		p.Do(append([]string{"EVALSHA", sha}, args...)...)
		p.Do(append([]string{"EVAL", reader}, args...)...)
		// Leave tables that cannot be refilled, for the next call.
		p.Do("EVAL", "KEYS.x = 1 ARGV.x = 1 return 1", "0")
	}
}
