-- SPDX-License-Identifier: BSD-2-Clause
-- settle=, a strict zone's charge: a request used more than it reserved,
-- and the difference is added to the count of now's window, as
-- settle_window_counts() in src/throttle/windows.cpp does. It never
-- rejects: the window's count may go beyond the limit, and the requests
-- after it are rejected until the window ends. (A settle that gives units
-- back is fixed_window_refund.lua.)
--
-- KEYS[1]  the key (as for fixed_window.lua)
-- ARGV[1]  W, the window, microseconds
-- ARGV[2]  units to charge (>= 1)
-- ARGV[3]  the most a count holds (kMaxWindowCount): a debt saturates there
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns the units the window counts now.

local window = tonumber(ARGV[1])
local units = tonumber(ARGV[2])
local max_count = tonumber(ARGV[3])

local now = clock_us(ARGV[4])

local start = window_start(now, window)
-- a count of an older window is no count at all
local _, count = fixed_window_count(KEYS[1], start)
count = math.min(count + units, max_count)
redis.call('HSET', KEYS[1], 'w', string.format('%d', start),
           'n', string.format('%d', count))
-- fresh again when the window ends, as fixed_window.lua sets it
redis.call('PEXPIRE', KEYS[1],
           string.format('%d', math.ceil((start + window - now) / 1000)))
return count
