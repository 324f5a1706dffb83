package compat_test

import (
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/testenv"
)

// Scripts of the size of the longest in Redis's own test suite, which
// redis-server runs in a second or two, complete within the default script
// budget, with redis-server's replies: a million SADDs in a loop (as its
// latency monitor's test of expire events loads a set), and cmsgpack
// packing and unpacking long strings, a 100,000-element array and a
// 100,000-key map (as its cmsgpack smoke test does). With the budget of
// before, 2,000,000 steps, both were stopped.
func TestDiffScriptsOfRedisSuiteSizeFitTheBudget(t *testing.T) {
	testenv.Long(t)
	p := newPair(t)
	// A million SADDs take seconds, and under the race detector a minute.
	p.ls.wait = 3 * time.Minute
	p.Do("EVAL", `local i = 0
while i < tonumber(ARGV[1]) do
  redis.call('sadd', KEYS[1], i)
  i = i + 1
end
return redis.call('scard', KEYS[1])`, "1", "bigset", "1000000")
	p.Do("EVAL", `local long = string.rep('y', 100000)
local list, map = {}, {}
for i = 1, 100000 do
  list[i] = i * 3
  map['k' .. i] = i
end
local value = {s = string.rep('x', 65530), l = long, a = list, m = map, f = 0.25, n = -3147483648, b = true}
local back = cmsgpack.unpack(cmsgpack.pack(value))
local sum = 0
for _, v in ipairs(back.a) do sum = sum + v end
local keys = 0
for k, v in pairs(back.m) do keys = keys + 1 end
local packed = cmsgpack.pack('short', string.rep('z', 250), long)
local offset, first = cmsgpack.unpack_limit(packed, 1, 0)
local _, second = cmsgpack.unpack_limit(packed, 1, offset)
return {#back.s, #back.l, sum, keys, tostring(back.f), tostring(back.n), tostring(back.b), first, #second}`, "0")
}
