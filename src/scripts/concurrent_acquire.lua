-- SPDX-License-Identifier: BSD-2-Clause
-- concurrent=: takes a place for a request of a key if fewer than the
-- limit of the key's requests are in flight. A key is a sorted set: its
-- members are the requests that hold a place, its scores when their
-- leases end (microseconds of Redis's clock). A lease that has ended is a
-- place freed: the nginx (or worker) of its request is gone, since a
-- request in flight has its lease renewed (concurrent_renew.lua).
--
-- KEYS[1]  the key
-- ARGV[1]  the limit: the places a key has
-- ARGV[2]  the lease, microseconds
-- ARGV[3]  the request's member, unique among the requests in flight
-- ARGV[4]  (tests only) now, microseconds
--
-- Returns {admitted: 1 or 0, places left, requests in flight}.

local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local now = clock_us(ARGV[4])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local held = redis.call('ZCARD', KEYS[1])
if held >= limit then
    return {0, 0, held}
end

redis.call('ZADD', KEYS[1], string.format('%d', now + lease), ARGV[3])
-- no member's lease ends later than this one's
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease / 1000)))
return {1, limit - held - 1, held + 1}
