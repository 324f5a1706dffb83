local a, b = 1, 'two'
x, a = a, x
do local c = a end
while a < 10 do a = a + 1 end
repeat local d = a until d == 0
if a then b = 1 elseif b then b = 2 else b = 3 end
for i = 1, 10, 2 do break end
for k, v in pairs(KEYS) do end
function f(n) return n end
function t.m:get() return self end
local function g(...) return ... end
f(1)
return a, b
