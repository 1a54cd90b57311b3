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
-- ARGV[3]  (tests only) now, microseconds
--
-- Returns {limited, limit, places left, 0, retry_after_us, now, seq}: as
-- every decision script (the key has no reset time: places free when
-- requests end, which no one can tell beforehand; a refused request may
-- retry in a second), then the request's member, "<now>:<seq>", for
-- concurrent_release.lua and concurrent_renew.lua.

local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local now = clock_us(ARGV[3])
local stamp = string.format('%d', now)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', stamp)
local held = redis.call('ZCARD', KEYS[1])
if held >= limit then
    return {1, limit, 0, 0, 1000000, 0, 0}
end

-- unique among the members: another request of this microsecond (from
-- any nginx) has taken the seq before
local seq = held
while redis.call('ZSCORE', KEYS[1], stamp .. ':' .. seq) do
    seq = seq + 1
end
redis.call('ZADD', KEYS[1], string.format('%d', now + lease),
           stamp .. ':' .. seq)
-- no member's lease ends later than this one's
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(lease / 1000)))
return {0, limit, limit - held - 1, 0, -1, now, seq}
