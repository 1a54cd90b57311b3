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
