-- SPDX-License-Identifier: BSD-2-Clause
-- concurrent=: a request still in flight keeps its place for another
-- lease. A request whose lease has ended is not given its place back: it
-- may have gone to another request.
--
-- KEYS[1]  the key (as for concurrent_acquire.lua)
-- ARGV[1]  the lease, microseconds
-- ARGV[2]  the time of the request's member (concurrent_acquire.lua)
-- ARGV[3]  its seq
-- ARGV[4]  (tests only) now, microseconds
--
-- Returns 1 if it still held its place, and now holds it for another
-- lease; 0 if not.

local lease = tonumber(ARGV[1])
local now = clock_us(ARGV[4])
local member = ARGV[2] .. ':' .. ARGV[3]

local ends = redis.call('ZSCORE', KEYS[1], member)
if not ends or tonumber(ends) <= now then
    return 0
end
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + lease), member)
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease / 1000)))
return 1
