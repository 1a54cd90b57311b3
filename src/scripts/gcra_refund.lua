-- SPDX-License-Identifier: BSD-2-Clause
-- Gives back what gcra.lua charged, for a request that another zone of the
-- same location rejected: the TAT moves back by T * cost, never before now.
-- settle= gives back part of a charge the same way (gcra_settle() in
-- src/throttle/gcra.cpp): a funnel drains as one, so any `cost` units.
--
-- KEYS[1]  the key (as for gcra.lua)
-- ARGV[1]  emission interval T, microseconds
-- ARGV[2]  cost that was charged (or the part of it to give back)
-- ARGV[3]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns the new time to live in microseconds (0: the key is gone).

local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then
    return 0
end

local now = clock_us(ARGV[3])
local new_tat = tat - tonumber(ARGV[1]) * tonumber(ARGV[2])

if new_tat <= now then
    redis.call('DEL', KEYS[1])
    return 0
end

redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX',
           string.format('%d', math.ceil((new_tat - now) / 1000)))
return new_tat - now
