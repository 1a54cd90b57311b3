-- SPDX-License-Identifier: BSD-2-Clause
-- Fixed window: a counter per aligned window [start, start + W), the same
-- arithmetic as src/throttle/fixed_window.cpp (see the window spec), so
-- Redis and local zones give the same answers.
--
-- KEYS[1]  the key; a hash: w = start of the window counted, n = units
--          admitted in it (integer strings)
-- ARGV[1]  W, the window, microseconds (whole milliseconds)
-- ARGV[2]  limit = the rate's count + burst (>= 1)
-- ARGV[3]  cost, units to charge (>= 0)
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns {limited, limit, remaining, reset_after_us, retry_after_us, start};
-- start names the window charged, for fixed_window_refund.lua.
-- All values stay below 2^53, where Lua's doubles are exact integers.

local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local now = clock_us(ARGV[4])

local start = window_start(now, window)
-- a count of an older window is no count at all
local same, count = fixed_window_count(KEYS[1], start)

local limited, retry_after = 0, -1

if cost > limit then
    -- never fits, nothing to retry after
    limited = 1
elseif count + cost <= limit then
    count = count + cost
    if cost > 0 and same then
        -- the window's key has its expiry since its first unit
        redis.call('HINCRBY', KEYS[1], 'n', cost)
    elseif cost > 0 then
        -- a request of cost 0 changes nothing: no write
        redis.call('HSET', KEYS[1], 'w', string.format('%d', start),
                   'n', string.format('%d', count))
        redis.call('PEXPIRE', KEYS[1],
                   string.format('%d', math.ceil((start + window - now) / 1000)))
    end
else
    -- a rejection counts nothing: the window's end frees it all
    limited = 1
    retry_after = start + window - now
end

-- below 0 only if the limit shrank (a reload) under a full window
local remaining = limit - count
if remaining < 0 then
    remaining = 0
end

local reset_after = 0
if count > 0 then
    reset_after = start + window - now
end

return {limited, limit, remaining, reset_after, retry_after, start}
