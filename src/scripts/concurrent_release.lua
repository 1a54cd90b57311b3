-- SPDX-License-Identifier: BSD-2-Clause
-- concurrent=: a request has ended (or another zone refused it); its
-- place is free.
--
-- KEYS[1]  the key (as for concurrent_acquire.lua)
-- ARGV[1]  the time of the request's member (concurrent_acquire.lua)
-- ARGV[2]  its seq
--
-- Returns 1 if it held a place, 0 if not (its lease had ended, and an
-- acquire removed it).

return redis.call('ZREM', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
