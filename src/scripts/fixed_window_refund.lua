-- SPDX-License-Identifier: BSD-2-Clause
-- Gives back what fixed_window.lua charged, for a request that another zone
-- of the same location rejected. Only the window that was charged is
-- touched: once the next window began, the charge no longer counts anyway.
--
-- KEYS[1]  the key (as for fixed_window.lua)
-- ARGV[1]  cost that was charged (settle=: the part of it to give back;
--          the count never goes below 0, as settle_window_counts() has it)
-- ARGV[2]  the window start fixed_window.lua returned
--
-- Returns the units the window counts now (0: the key is gone, or holds
-- another window).

local stored = redis.call('HMGET', KEYS[1], 'w', 'n')
if tonumber(stored[1]) ~= tonumber(ARGV[2]) then
    return 0
end

local n = tonumber(stored[2]) or 0
local new_n = n - tonumber(ARGV[1])

if new_n <= 0 then
    -- an empty window is a fresh key
    redis.call('DEL', KEYS[1])
    return 0
end

if new_n ~= n then
    -- HSET keeps the hash's expiry
    redis.call('HSET', KEYS[1], 'n', string.format('%d', new_n))
end
return new_n
