// SPDX-License-Identifier: BSD-2-Clause
// CRC16 as Redis Cluster computes it (XMODEM: polynomial 0x1021, initial
// value 0, no reflection): the one checksum behind both a key's cluster
// slot (key_slot()) and an async key's shard (async_shard()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace throttle {

uint16_t crc16(const unsigned char *data, size_t len) noexcept;

} // namespace throttle
