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
-- ARGV[1]       the window, microseconds
-- ARGV[3i - 1]  units the node admitted to KEYS[i] in its current window
--               (negative: settles gave more back, never below 0)
-- ARGV[3i]      ... in the window before (not counted: that window is over)
-- ARGV[3i + 1]  how long ago, by the node's clock, its current window began
--               (relative, so that the node's clock does not matter beyond
--               agreeing on where windows start)
--
-- Returns {elapsed, n_1, ..., n_n}: how far Redis is into its current
-- window, and each key's count in it, microseconds and units.

local w = tonumber(ARGV[1])
local now = clock_us()
local start = window_start(now, w)
local out = {now - start}

for i, key in ipairs(KEYS) do
    local cur = tonumber(ARGV[3 * i - 1])
    -- the node's window by this clock: the window start nearest to it
    local began = now - tonumber(ARGV[3 * i + 1]) + w / 2
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
