-- SPDX-License-Identifier: BSD-2-Clause
-- settle=, a strict zone's charge: a request used more than it reserved,
-- and the difference is charged now, the same arithmetic as gcra_settle()
-- in src/throttle/gcra.cpp. It never rejects: the request was served, and
-- the requests after it are rejected until the debt has drained. (A
-- settle that gives units back is gcra_refund.lua: a charge needs no
-- token of the reservation, a refund does; see Algorithm::charge_args().)
--
-- KEYS[1]  the key (as for gcra.lua)
-- ARGV[1]  emission interval T, microseconds
-- ARGV[2]  units to charge (>= 1)
-- ARGV[3]  the furthest ahead of now the TAT may go, microseconds (the
--          debt's cap, kMaxDebtUs)
-- ARGV[4]  tests only: "now" in microseconds instead of Redis TIME
--
-- Returns the new time to live in microseconds (TAT - now).
-- The TAT stays below 2^53, where Lua's doubles are exact integers: a
-- product beyond that is beyond the cap too.

local t = tonumber(ARGV[1])
local units = tonumber(ARGV[2])
local max_debt = tonumber(ARGV[3])

local now = clock_us(ARGV[4])

local tat = funnel_tat(KEYS[1], now)

local new_tat = tat + t * units
if new_tat > now + max_debt then
    new_tat = now + max_debt
end

-- the key expires when it is the same as a fresh one, as gcra.lua sets it
local ttl = new_tat - now
redis.call('SET', KEYS[1], string.format('%d', new_tat),
           'PX', string.format('%d', math.ceil(ttl / 1000)))
return ttl
