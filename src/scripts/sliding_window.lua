-- SPDX-License-Identifier: BSD-2-Clause
-- Sliding window, Cloudflare's approximation from two counters (the current
-- aligned window's and the previous one's), the same arithmetic as
-- src/throttle/sliding_window.cpp (see the window spec): every double
-- below is computed by the same operations in the same order, so both
-- round alike and Redis and local zones give the same answers.
--
-- KEYS[1]  the key; a hash: w = start of the current window, p = units
--          admitted in the window before it, c = units admitted in it
--          (integer strings)
-- ARGV[1]  W, the window, microseconds (whole milliseconds)
-- ARGV[2]  limit = the rate's count + burst (>= 1, < 2^31)
-- ARGV[3]  cost, units to charge (>= 0)
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns {limited, limit, remaining, reset_after_us, retry_after_us, start};
-- start names the window charged, for sliding_window_refund.lua.
-- All integers stay below 2^53, where Lua's doubles are exact.

local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local now = clock_us(ARGV[4])

local start = window_start(now, window)
-- the counters as seen from now's window
local w, prev, cur = window_counters(KEYS[1], start, window)
local elapsed = now - start

-- ((p * (W - e)) / W) + c, in this order (the C++ twin's expression tree)
local function weighted(e, p, c)
    return p * (window - e) / window + c
end

local function fits(e, p, c)
    return weighted(e, p, c) + cost <= limit
end

local wnow = weighted(elapsed, prev, cur)
local limited, retry_after, remaining = 0, -1, 0

if cost > limit then
    -- never fits, nothing to retry after
    limited = 1
    remaining = math.floor(limit - wnow)
elseif wnow + cost <= limit then
    remaining = math.floor(limit - (wnow + cost))
    cur = cur + cost
    if cost > 0 and w == start then
        -- the window's counters have their expiry since it began here
        redis.call('HINCRBY', KEYS[1], 'c', cost)
    elseif cost > 0 then
        -- a request of cost 0 changes nothing: no write; the counters live
        -- until the end of the next window, where they weigh nothing
        redis.call('HSET', KEYS[1], 'w', string.format('%d', start),
                   'p', string.format('%d', prev),
                   'c', string.format('%d', cur))
        redis.call('PEXPIRE', KEYS[1], string.format('%d',
                   math.ceil((start + 2 * window - now) / 1000)))
    end
else
    limited = 1
    remaining = math.floor(limit - wnow)

    -- The first microsecond at which the request fits. The closed forms
    -- solve weighted(e) + cost = limit; the loops only step over their
    -- rounding (fits() is monotonic in e), a step or two.
    local found = false
    if prev > 0 and cur + cost <= limit then
        -- later in this window, as the previous one weighs less
        local e = math.ceil(window - (limit - cur - cost) * window / prev)
        if e < elapsed then
            e = elapsed
        end
        while e < window and not fits(e, prev, cur) do
            e = e + 1
        end
        if e < window then
            retry_after = start + e - now
            found = true
        end
    end
    if not found then
        -- in the next window, where this one's count is the previous one
        -- (at its end it weighs nothing and cost <= limit fits: the loop ends)
        local e = 0
        if cur > 0 then
            e = math.ceil(window - (limit - cost) * window / cur)
        end
        if e < 0 then
            e = 0
        end
        while not fits(e, cur, 0) do
            e = e + 1
        end
        retry_after = start + window + e - now
    end
end

if remaining < 0 then
    remaining = 0
end

local reset_after = 0
if cur > 0 then
    reset_after = start + 2 * window - now
elseif prev > 0 then
    reset_after = start + window - now
end

return {limited, limit, remaining, reset_after, retry_after, start}
