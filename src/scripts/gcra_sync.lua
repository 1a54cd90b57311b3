-- SPDX-License-Identifier: BSD-2-Clause
-- Async mode: one node's consumption since its last sync, for many keys of
-- one zone at once; returns the global state that replaces the node's view.
-- The node has already admitted these units, so nothing is rejected here:
-- the funnel just moves on by T * units (or back, by what settles gave
-- back).
--
-- KEYS[1..n]    the zone's keys (one hash tag, the zone: one slot)
-- ARGV[1]       emission interval T, microseconds; 0 where each key gives
--               its own (a zone whose rate= is a variable: docs/plans.md)
-- ARGV[2]       grace, microseconds: how long a key outlives its TAT, so
--               that units another node charged up to that long ago still
--               find the record of this node's (the nodes send no older)
-- then per key, s = 2 integers (3 with its own T) from ARGV[2 + s(i-1) + 1]:
--   units       the node charged to KEYS[i] since its last sync (0: only
--               read the global state; negative: settles gave more back
--               than it charged, which moves the funnel back, never
--               before now)
--   age         how long ago the first of them was charged, microseconds
--               (relative, so the node's clock does not matter)
--   T           the key's emission interval, its latest request's (only
--               where ARGV[1] is 0)
--
-- Returns {ttl_1, ..., ttl_n}: TAT - now per key, microseconds of the Redis
-- clock (0 for a key that is fresh everywhere).

local zone_t = tonumber(ARGV[1])
local grace = tonumber(ARGV[2])
local stride = zone_t == 0 and 3 or 2
local now = clock_us()
local ttls = {}

local function store(key, tat, swap)
    -- integers as strings: a number argument would go through %.14g
    local px = string.format('%d', math.ceil((tat + grace - now) / 1000))
    if swap then
        -- one call for a key that Redis does not hold, or whose funnel had
        -- drained before the units began (most keys, hot or crawled): sets
        -- it and says what it held, which the caller checks
        return redis.call('SET', key, string.format('%d', tat), 'PX', px,
                          'GET')
    end
    return redis.call('SET', key, string.format('%d', tat), 'PX', px)
end

for i, key in ipairs(KEYS) do
    local at = 2 + stride * (i - 1)
    local units = tonumber(ARGV[at + 1])
    local t = zone_t == 0 and tonumber(ARGV[at + 3]) or zone_t
    local tat

    if units > 0 then
        -- the units arrived over the last interval, not now: a funnel that
        -- drained meanwhile starts filling from when they began
        local since = now - tonumber(ARGV[at + 2])
        local held

        tat = since + t * units
        if tat + grace > now then
            held = store(key, tat, true)
        else
            held = redis.call('GET', key)
        end

        -- what the key held had not drained when the units began: they
        -- queue up behind it (the swap above stored too little)
        held = tonumber(held)
        if held and held > since then
            tat = held + t * units
            if tat + grace > now then
                store(key, tat, false)
            end
        end
    elseif units < 0 then
        tat = tonumber(redis.call('GET', key))
        if tat and tat > now then
            tat = math.max(tat + t * units, now)
            store(key, tat, false)
        end
    else
        tat = tonumber(redis.call('GET', key))
    end

    if not tat or tat < now then
        tat = now
    end

    ttls[i] = tat - now
end

return ttls
