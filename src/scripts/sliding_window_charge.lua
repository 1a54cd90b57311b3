-- SPDX-License-Identifier: BSD-2-Clause
-- settle=, a strict zone's charge: a request used more than it reserved,
-- and the difference is added to the current window's counter, as
-- settle_window_counts() in src/throttle/windows.cpp does. It never
-- rejects: the counter may go beyond the limit, and the requests after it
-- are rejected until its weight has drained. (A settle that gives units
-- back is sliding_window_refund.lua.)
--
-- KEYS[1]  the key (as for sliding_window.lua)
-- ARGV[1]  W, the window, microseconds
-- ARGV[2]  units to charge (>= 1)
-- ARGV[3]  the most a counter holds (kMaxWindowCount): a debt saturates
--          there
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns the units the current window counts now.

local window = tonumber(ARGV[1])
local units = tonumber(ARGV[2])
local max_count = tonumber(ARGV[3])

local now = clock_us(ARGV[4])

local start = window_start(now, window)
-- the counters as seen from now's window, as sliding_window.lua reads them
local _, prev, cur = window_counters(KEYS[1], start, window)

cur = math.min(cur + units, max_count)
redis.call('HSET', KEYS[1], 'w', string.format('%d', start),
           'p', string.format('%d', prev), 'c', string.format('%d', cur))
-- the counters weigh nothing after the next window, as sliding_window.lua
-- sets it
redis.call('PEXPIRE', KEYS[1], string.format('%d',
           math.ceil((start + 2 * window - now) / 1000)))
return cur
