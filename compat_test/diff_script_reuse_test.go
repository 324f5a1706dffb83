package compat_test

import "testing"

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
