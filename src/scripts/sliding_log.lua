-- SPDX-License-Identifier: BSD-2-Clause
-- Sliding log: exact; one timestamp per admitted unit, counted while it is
-- in the window (an entry at ts counts while now < ts + W). The same
-- answers as src/throttle/sliding_log.cpp (see the window spec).
--
-- KEYS[1]  the key; a sorted set: score = ts (us), member = "<ts>:<seq>"
-- ARGV[1]  W, the window, microseconds (whole milliseconds)
-- ARGV[2]  limit = the rate's count + burst (>= 1)
-- ARGV[3]  cost, units to charge (>= 0)
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns {limited, limit, remaining, reset_after_us, retry_after_us, now,
-- count}: the members this request added are "<now>:<count + j>", j = 0 ..
-- cost - 1, for sliding_log_refund.lua.
-- All values stay below 2^53, where Lua's doubles are exact integers.

local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local now = clock_us(ARGV[4])

-- Entries at ts <= now - W have left the window. What remains is what
-- counts; the set empties (and goes) when the last entry leaves.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - window))
local count = redis.call('ZCARD', KEYS[1])

local limited, retry_after, reset_after = 0, -1, -1
local counted = count

if cost > limit then
    -- never fits, nothing to retry after
    limited = 1
elseif count + cost <= limit then
    counted = count + cost
    if cost > 0 then
        -- seq = count + j is unique among the members at now: a later
        -- request in the same microsecond sees them in its count
        log_entries(KEYS[1], string.format('%d', now), count, cost)
        -- the set is a fresh key's when the newest entry, now, leaves
        redis.call('PEXPIRE', KEYS[1], string.format('%d', window / 1000))
        reset_after = window
    end
else
    -- the k-th oldest entry leaving makes room for cost units
    limited = 1
    local k = count + cost - limit
    local entry = redis.call('ZRANGE', KEYS[1], string.format('%d', k - 1),
                             string.format('%d', k - 1), 'WITHSCORES')
    retry_after = tonumber(entry[2]) + window - now
end

if reset_after < 0 then
    -- until the newest entry leaves the window
    reset_after = 0
    if count > 0 then
        local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
        reset_after = tonumber(newest[2]) + window - now
    end
end

-- below 0 only if the limit shrank (a reload) under a full log
local remaining = limit - counted
if remaining < 0 then
    remaining = 0
end

return {limited, limit, remaining, reset_after, retry_after, now, count}
