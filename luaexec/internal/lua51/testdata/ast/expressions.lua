local t = {1, 'two', x = true, [3] = false, nil}
local n = -t[1] + 2 * 3 ^ 2 / 4 - #t
local ok = not (n > 1 and n <= 2 or n ~= 3)
local len, neg = #'abc', -5
local f = function(a, b) return a == b, a < b end
return t.x, t[n], KEYS[1], redis.call('get', KEYS[1]), t:m(), ...
