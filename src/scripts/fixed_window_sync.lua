-- SPDX-License-Identifier: BSD-2-Clause
-- Async mode, fixed_window: one node's units since its last sync, for many
-- keys of one zone at once; returns Redis's counts, which replace the
-- node's view. The node has already admitted these units: nothing is
-- rejected here, the counts just grow (or shrink, not below 0, by what
-- settles gave back).
--
-- KEYS[1..n]    the zone's keys (one hash tag, the zone: one slot); each a
--               hash {w = window start, n = units counted in it}, as
--               fixed_window.lua keeps it
-- ARGV[1]       the window, microseconds; 0 where each key gives its own
--               (a zone whose rate= is a variable: docs/plans.md)
-- then per key, s = 3 integers (4 with its own window) from
-- ARGV[1 + s(i-1) + 1]:
--   cur         units the node admitted to KEYS[i] in its current window
--               (negative: settles gave more back, never below 0)
--   prev        ... in the window before (not counted: that window is over)
--   age         how long ago, by the node's clock, its current window
--               began (relative, so that the node's clock does not matter
--               beyond agreeing on where windows start)
--   window      the key's window, its latest request's (only where
--               ARGV[1] is 0)
--
-- Returns {elapsed, n_1, ..., n_n}: how far Redis is into its current
-- window (where each key has its own window: Redis's clock, from which
-- each key's follows), and each key's count in it, microseconds and
-- units.

local zone_w = tonumber(ARGV[1])
local stride = zone_w == 0 and 4 or 3
local now = clock_us()
local out = {zone_w == 0 and now or now - window_start(now, zone_w)}

for i, key in ipairs(KEYS) do
    local at = 1 + stride * (i - 1)
    local w = zone_w == 0 and tonumber(ARGV[at + 4]) or zone_w
    local start = window_start(now, w)
    local cur = tonumber(ARGV[at + 1])
    -- the node's window by this clock: the window start nearest to it
    local began = now - tonumber(ARGV[at + 3]) + w / 2
    began = window_start(began, w)

    local held = redis.call('HMGET', key, 'w', 'n')
    local n = 0
    if tonumber(held[1]) == start then
        n = tonumber(held[2])
    end

    if cur ~= 0 and began == start then
        n = math.max(n + cur, 0)
        redis.call('HSET', key, 'w', string.format('%d', start), 'n',
                   string.format('%d', n))
        redis.call('PEXPIRE', key,
                   string.format('%d', math.ceil((start + w - now) / 1000)))
    end

    out[i + 1] = n
end

return out
