-- SPDX-License-Identifier: BSD-2-Clause
-- settle=, a strict zone's charge: a request used more than it reserved,
-- and the difference is logged now, as a local zone's ring logs it
-- (sliding_log_record()). It never rejects, but a log holds at most
-- `limit` entries in its window: the oldest give way, and a debt is at
-- most a log full of entries at now, which rejects every request for a
-- window. (A settle that gives units back is sliding_log_refund.lua.)
--
-- KEYS[1]  the key (as for sliding_log.lua)
-- ARGV[1]  W, the window, microseconds
-- ARGV[2]  units to charge (>= 1)
-- ARGV[3]  limit = the rate's count + burst: the most entries the log keeps
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns the entries in the window now.

local window = tonumber(ARGV[1])
local units = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])

local now = clock_us(ARGV[4])
local ts = string.format('%d', now)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - window))
local count = redis.call('ZCARD', KEYS[1])
local added = math.min(units, limit)

-- Members are "<now>:<seq>". sliding_log.lua numbers a request's from the
-- count (seq = count + j < limit, as it admits no more than the limit):
-- a charge numbers its own from the limit up, where no decision's go,
-- and past any other charge's of the same microsecond.
local first = limit
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ts, ts)) do
    local seq = tonumber(string.match(member, ':(%d+)$'))
    if seq and seq >= first then
        first = seq + 1
    end
end

-- the oldest entries give way (by score; which of a microsecond's go does
-- not matter)
local excess = count + added - limit
if excess > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, excess - 1)
end

log_entries(KEYS[1], ts, first, added)
-- the set is a fresh key's when the newest entry, now, leaves
redis.call('PEXPIRE', KEYS[1], string.format('%d', window / 1000))
return math.min(count + added, limit)
