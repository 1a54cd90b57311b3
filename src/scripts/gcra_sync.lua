-- Async mode: one node's consumption since its last sync, for many keys of
-- one zone at once; returns the global state that replaces the node's view.
-- The node has already admitted these units, so nothing is rejected here:
-- the funnel just moves on by T * units.
--
-- KEYS[1..n]   the zone's keys (one hash tag, the zone: one slot)
-- ARGV[1]      emission interval T, microseconds
-- ARGV[1 + i]  units the node charged to KEYS[i] since its last sync
--              (0: only read the global state)
--
-- Returns {ttl_1, ..., ttl_n}: TAT - now per key, microseconds of the Redis
-- clock (0 for a key that is fresh everywhere).

local t = tonumber(ARGV[1])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local ttls = {}

for i, key in ipairs(KEYS) do
    local units = tonumber(ARGV[i + 1])
    local tat = tonumber(redis.call('GET', key)) or now
    if tat < now then
        tat = now
    end

    if units > 0 then
        tat = tat + t * units
        redis.call('SET', key, string.format('%.0f', tat), 'PX',
                   math.ceil((tat - now) / 1000))
    end

    ttls[i] = tat - now
end

return ttls
