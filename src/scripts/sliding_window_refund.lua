-- SPDX-License-Identifier: BSD-2-Clause
-- Gives back what sliding_window.lua charged, for a request that another
-- zone of the same location rejected: from the current counter while its
-- window lasts, from the previous one in the next window, else not at all
-- (by then the charge weighs nothing).
--
-- KEYS[1]  the key (as for sliding_window.lua)
-- ARGV[1]  cost that was charged (settle=: the part of it to give back;
--          the counter never goes below 0, as settle_window_counts() has
--          it, which also ends the key's life earlier once the current
--          counter is 0: here it keeps its expiry, and reads the same)
-- ARGV[2]  the window start sliding_window.lua returned
-- ARGV[3]  W, the window, microseconds
--
-- Returns 1 if a counter changed, else 0.

local cost = tonumber(ARGV[1])
local start = tonumber(ARGV[2])
local window = tonumber(ARGV[3])

local stored = redis.call('HMGET', KEYS[1], 'w', 'p', 'c')
local w = tonumber(stored[1])

local field, value
if w == start then
    field, value = 'c', tonumber(stored[3]) or 0
elseif w == start + window then
    field, value = 'p', tonumber(stored[2]) or 0
else
    return 0
end

local new_value = value - cost
if new_value < 0 then
    new_value = 0
end
if new_value == value then
    return 0
end

-- HSET keeps the hash's expiry
redis.call('HSET', KEYS[1], field, string.format('%d', new_value))
return 1
