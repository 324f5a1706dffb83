local s = 'n=' .. 1 .. 'x' .. ARGV[1]
local r = ARGV[1] % 3
local m = -ARGV[2]
for i = ARGV[1], #KEYS do end
local goto = 1
return tostring(goto), s, r, m
