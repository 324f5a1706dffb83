local t = {}
t[KEYS[1]] = 1
t[1], t[ARGV[1]] = 2, 3
local u = {[KEYS[1]] = 1, 2, y = 3}
local function f(...) return select('#', ...), {...} end
if t[1] == u[1] then return f(unpack(t)) end
return averyveryverylongglobalname, t[ARGV[2]]
