#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The name of an async zone's key in Redis, as the module writes it
(format_redis_key() with HashTag::shard, src/throttle/redis.hpp):
"<prefix>{<zone>:<shard>}:<key>", the shard being the CRC16 of Redis
Cluster of the key as the zone stores it (its SHA-256 past 255 bytes)
modulo 16; the key as it is if plain, else "~" and its hex, or "#" and its
digest's hex if long. t/unit/redis_test.cpp pins names the module writes.

    redis_keys.py PREFIX ZONE KEY     prints the name
"""

import hashlib
import re
import sys

ASYNC_SHARDS = 16
MAX_INLINE_KEY = 255
PLAIN = re.compile(rb"[A-Za-z0-9\-_.:@/=+]+")


def crc16(data):
    """CRC16 (XMODEM: polynomial 0x1021, initial value 0), bit by bit."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def async_key(prefix, zone, key):
    raw = key.encode() if isinstance(key, str) else key
    if len(raw) > MAX_INLINE_KEY:
        stored = hashlib.sha256(raw).digest()
        part = "#" + stored.hex()
    else:
        stored = raw
        part = raw.decode() if PLAIN.fullmatch(raw) else "~" + raw.hex()
    return "%s{%s:%d}:%s" % (prefix, zone, crc16(stored) % ASYNC_SHARDS, part)


if __name__ == "__main__":
    print(async_key(*sys.argv[1:4]))
