-- SPDX-License-Identifier: BSD-2-Clause
-- GCRA with redis-cell CL.THROTTLE semantics, the same arithmetic as
-- src/throttle/gcra.cpp, so Redis and local zones give the same answers.
--
-- KEYS[1]  the key; holds the theoretical arrival time (TAT), microseconds
--          of the Redis clock, as an integer string
-- ARGV[1]  emission interval T, microseconds
-- ARGV[2]  tolerance DVT = T * limit, microseconds
-- ARGV[3]  limit = burst + 1
-- ARGV[4]  cost, units to charge (>= 0)
-- ARGV[5]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns {limited, limit, remaining, reset_after_us, retry_after_us}.
-- All values stay below 2^53, where Lua's doubles are exact integers.

local t = tonumber(ARGV[1])
local dvt = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local now = clock_us(ARGV[5])

local tat = funnel_tat(KEYS[1], now)

local limited, retry_after, ttl = 0, -1, 0

if cost > limit then
    -- T * cost > DVT: rejected now and forever, nothing to retry after
    limited = 1
    ttl = tat - now
else
    local new_tat = tat + t * cost
    local allow_at = new_tat - dvt
    if now < allow_at then
        limited = 1
        retry_after = allow_at - now
        ttl = tat - now
    else
        ttl = new_tat - now
        if ttl > 0 then
            -- the key expires when it is the same as a fresh one
            redis.call('SET', KEYS[1], string.format('%d', new_tat),
                       'PX', string.format('%d', math.ceil(ttl / 1000)))
        else
            redis.call('DEL', KEYS[1])
        end
    end
end

local remaining = 0
local next = dvt - ttl
if next > 0 then
    -- floor of an integer division; a double quotient may round up
    remaining = math.floor(next / t)
    if remaining * t > next then
        remaining = remaining - 1
    end
end

return {limited, limit, remaining, ttl, retry_after}
