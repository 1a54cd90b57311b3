-- SPDX-License-Identifier: BSD-2-Clause
-- Gives back what sliding_log.lua charged, for a request that another zone
-- of the same location rejected: removes the entries it added (those that
-- already left the window are gone anyway).
--
-- KEYS[1]  the key (as for sliding_log.lua)
-- ARGV[1]  ts: the "now" sliding_log.lua returned
-- ARGV[2]  the first seq: the count sliding_log.lua returned
-- ARGV[3]  cost that was charged (settle=: the part of it to give back,
--          then its first members go; at most the limit, as a request
--          adds no more). Members that have left the window count as
--          removed here, not in sliding_log_refund() in C++, but weighed
--          nothing already: the log reads the same.
--
-- Returns the number of entries removed.

local ts = string.format('%d', tonumber(ARGV[1]))
local first = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- in batches, as unpack() takes at most a few thousand values
local removed = 0
local members = {}
for seq = first, first + cost - 1 do
    members[#members + 1] = ts .. ':' .. string.format('%d', seq)
    if #members == 1000 then
        removed = removed + redis.call('ZREM', KEYS[1], unpack(members))
        members = {}
    end
end
if #members > 0 then
    removed = removed + redis.call('ZREM', KEYS[1], unpack(members))
end
-- an emptied set is gone; one that is not keeps its expiry
return removed
