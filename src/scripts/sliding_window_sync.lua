-- SPDX-License-Identifier: BSD-2-Clause
-- Async mode, sliding_window: one node's units since its last sync, for
-- many keys of one zone at once; returns Redis's counts, which replace the
-- node's view. The node has already admitted these units: nothing is
-- rejected here, the counts just grow (or shrink, not below 0, by what
-- settles gave back).
--
-- KEYS[1..n]    the zone's keys (one hash tag, the zone: one slot); each a
--               hash {w = current window start, p = units of the window
--               before, c = units of the current one}, as
--               sliding_window.lua keeps it
-- ARGV[1]       the window, microseconds; 0 where each key gives its own
--               (a zone whose rate= is a variable: docs/plans.md)
-- then per key, s = 3 integers (4 with its own window) from
-- ARGV[1 + s(i-1) + 1]:
--   cur         units the node admitted to KEYS[i] in its current window
--   prev        ... in the window before it (either may be negative)
--   age         how long ago, by the node's clock, its current window
--               began (relative, so that the node's clock does not matter
--               beyond agreeing on where windows start)
--   window      the key's window, its latest request's (only where
--               ARGV[1] is 0)
--
-- Returns {elapsed, p_1, c_1, ..., p_n, c_n}: how far Redis is into its
-- current window (where each key has its own window: Redis's clock, from
-- which each key's follows), and each key's counts for it and the one
-- before.

local zone_w = tonumber(ARGV[1])
local stride = zone_w == 0 and 4 or 3
local now = clock_us()
local out = {zone_w == 0 and now or now - window_start(now, zone_w)}

for i, key in ipairs(KEYS) do
    local at = 1 + stride * (i - 1)
    local w = zone_w == 0 and tonumber(ARGV[at + 4]) or zone_w
    local start = window_start(now, w)
    local cur = tonumber(ARGV[at + 1])
    local prev = tonumber(ARGV[at + 2])
    -- the node's window by this clock: the window start nearest to it
    local began = now - tonumber(ARGV[at + 3]) + w / 2
    began = window_start(began, w)

    local held = redis.call('HMGET', key, 'w', 'p', 'c')
    local held_w = tonumber(held[1])
    local p, c = 0, 0
    if held_w == start then
        p, c = tonumber(held[2]), tonumber(held[3])
    elseif held_w == start - w then
        p = tonumber(held[3])
    end

    local added = false
    if began == start and (cur ~= 0 or prev ~= 0) then
        c = math.max(c + cur, 0)
        p = math.max(p + prev, 0)
        added = true
    elseif began == start - w and cur ~= 0 then
        -- the node's window is over here: its units weigh as the previous
        p = math.max(p + cur, 0)
        added = true
    end

    if added then
        redis.call('HSET', key, 'w', string.format('%d', start), 'p',
                   string.format('%d', p), 'c', string.format('%d', c))
        redis.call('PEXPIRE', key, string.format('%d',
                   math.ceil((start + 2 * w - now) / 1000)))
    end

    out[2 * i] = p
    out[2 * i + 1] = c
end

return out
