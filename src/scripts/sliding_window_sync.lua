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
-- ARGV[1]       the window, microseconds
-- ARGV[3i - 1]  units the node admitted to KEYS[i] in its current window
-- ARGV[3i]      ... in the window before it (either may be negative)
-- ARGV[3i + 1]  how long ago, by the node's clock, its current window began
--               (relative, so that the node's clock does not matter beyond
--               agreeing on where windows start)
--
-- Returns {elapsed, p_1, c_1, ..., p_n, c_n}: how far Redis is into its
-- current window, and each key's counts for it and the one before.

local w = tonumber(ARGV[1])
local now = clock_us()
local start = window_start(now, w)
local out = {now - start}

for i, key in ipairs(KEYS) do
    local cur = tonumber(ARGV[3 * i - 1])
    local prev = tonumber(ARGV[3 * i])
    -- the node's window by this clock: the window start nearest to it
    local began = now - tonumber(ARGV[3 * i + 1]) + w / 2
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
