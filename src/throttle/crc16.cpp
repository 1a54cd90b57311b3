// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/crc16.hpp"

#include <array>

namespace throttle {

namespace {

// The CRC of each byte value, one table lookup a byte instead of eight
// shifts.
constexpr std::array<uint16_t, 256>
crc16_table() noexcept
{
    std::array<uint16_t, 256> table{};
    for (unsigned byte = 0; byte < 256; byte++) {
        unsigned crc = byte << 8;
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
        }
        table[byte] = static_cast<uint16_t>(crc);
    }
    return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = crc16_table();

} // namespace

uint16_t
crc16(const unsigned char *data, size_t len) noexcept
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc = static_cast<uint16_t>((crc << 8)
                                    ^ kCrc16Table[(crc >> 8) ^ data[i]]);
    }
    return crc;
}

} // namespace throttle
