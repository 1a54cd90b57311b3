-- SPDX-License-Identifier: BSD-2-Clause
-- concurrent=: a request has ended; its place is free.
--
-- KEYS[1]  the key (as for concurrent_acquire.lua)
-- ARGV[1]  the request's member
--
-- Returns 1 if it held a place, 0 if not (its lease had ended and another
-- acquire removed it).

return redis.call('ZREM', KEYS[1], ARGV[1])
