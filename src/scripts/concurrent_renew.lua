-- SPDX-License-Identifier: BSD-2-Clause
-- concurrent=: the requests of a key that one worker still has in flight
-- keep their places for another lease. A request whose lease has ended is
-- not given its place back: it may have gone to another request.
--
-- KEYS[1]   the key (as for concurrent_acquire.lua)
-- ARGV[1]   the lease, microseconds
-- ARGV[2]   (tests only) now, microseconds; empty otherwise
-- ARGV[3..] the members of the requests
--
-- Returns how many of them still held their place, and now hold it for
-- another lease.

local lease = tonumber(ARGV[1])
local now = clock_us(ARGV[2] ~= '' and ARGV[2] or nil)
local score = string.format('%d', now + lease)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local renewed = 0
for i = 3, #ARGV do
    if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
        redis.call('ZADD', KEYS[1], 'XX', score, ARGV[i])
        renewed = renewed + 1
    end
end

if renewed > 0 then
    redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease / 1000)))
end
return renewed
