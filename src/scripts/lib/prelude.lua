-- SPDX-License-Identifier: BSD-2-Clause
-- What every script shares: cmake/embed_scripts.cmake puts it first in each.

-- Microseconds of Redis's clock, which every node shares; the tests pass
-- a "now" of their own instead (nil otherwise).
local function clock_us(test_now)
    if test_now then
        return tonumber(test_now)
    end
    local time = redis.call('TIME')
    return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- The start of the window that `at` falls in: windows are aligned on
-- multiples of their length. math.fmod is exact; Lua's % is
-- a - floor(a / b) * b, whose quotient may round.
local function window_start(at, window)
    return at - math.fmod(at, window)
end

-- A sliding_window key's counters (a hash: w = start of its current
-- window, p and c = the units of the window before it and of it) as seen
-- from the window starting at `start`: a stored window that has become
-- the previous one brings its count along; an older one counts nothing.
-- Returns w as stored, then the previous and the current counts.
local function window_counters(key, start, window)
    local stored = redis.call('HMGET', key, 'w', 'p', 'c')
    local w = tonumber(stored[1])
    local prev, cur = 0, 0
    if w == start then
        prev = tonumber(stored[2]) or 0
        cur = tonumber(stored[3]) or 0
    elseif w == start - window then
        prev = tonumber(stored[3]) or 0
    end
    return w, prev, cur
end

-- Adds n entries at `ts` (a string) to a sliding log, members "<ts>:<seq>"
-- for seq = first .. first + n - 1; in batches, as unpack() takes at most
-- a few thousand values.
local function log_entries(key, ts, first, n)
    local args = {}
    for j = 0, n - 1 do
        args[#args + 1] = ts
        args[#args + 1] = ts .. ':' .. string.format('%d', first + j)
        if #args == 2000 then
            redis.call('ZADD', key, unpack(args))
            args = {}
        end
    end
    if #args > 0 then
        redis.call('ZADD', key, unpack(args))
    end
end

-- A GCRA key's theoretical arrival time as of now: a TAT in the past (or
-- none) is a funnel that has drained, the same as now.
local function funnel_tat(key, now)
    local tat = tonumber(redis.call('GET', key)) or now
    if tat < now then
        tat = now
    end
    return tat
end

-- A fixed_window key's count (a hash: w = start of the window counted, n
-- = its units) as of the window starting at `start`: a count of another
-- window is no count at all. Returns whether it is that window's, and
-- the count.
local function fixed_window_count(key, start)
    local stored = redis.call('HMGET', key, 'w', 'n')
    if tonumber(stored[1]) ~= start then
        return false, 0
    end
    return true, tonumber(stored[2]) or 0
end
