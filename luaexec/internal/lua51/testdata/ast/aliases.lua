local KEYS2 = KEYS
redis.call('set', KEYS2[1], ARGV[1])
redis.pcall = nil
KEYS = {}
return _G.redis, string.rep('x', 2)
