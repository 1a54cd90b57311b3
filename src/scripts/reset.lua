-- SPDX-License-Identifier: BSD-2-Clause
-- throttle_api's reset (DELETE): a zone's key is a fresh key from then
-- on. Every algorithm keeps a key's state in Redis as one key (a string,
-- a hash or a sorted set), in strict and async zones alike, and a fresh
-- key is one Redis does not hold: deleting it is the reset. A script
-- rather than a plain DEL, so that it goes where every other command
-- goes (EVALSHA, the key in KEYS[1], routed by its slot on a Cluster).
--
-- KEYS[1]  the key (as for the zone's decision or sync script)
--
-- Returns 1 if Redis held the key, 0 if it was fresh already.

return redis.call('DEL', KEYS[1])
