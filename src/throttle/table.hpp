// SPDX-License-Identifier: BSD-2-Clause
// The rules of a zone's table of keys (local and strict zones), whose
// memory the glue holds: a key's tag, its two candidate buckets, and the
// recency of a bucket's slots. A bucket is one cache line: a word of
// recency, then the tags of its seven slots; a slot's words (what
// Policy::slot_words() says) are in an array beside the buckets.
#pragma once

#include "throttle/key.hpp"
#include "throttle/siphash.hpp"

#include <cstddef>
#include <cstdint>

namespace throttle {

// Slots per bucket: a recency word and seven 8-byte tags make 64 bytes.
constexpr unsigned kBucketSlots = 7;

// A key's tag: its SipHash-2-4 under the zone's secret (a digest of a
// long key hashed apart from a raw key of the same bytes). Never 0, which
// marks an empty slot. Two keys share a slot, and so a budget, only if
// their tags are equal: see docs/architecture.md for the odds.
uint64_t key_tag(const SipKey &secret, const ZoneKey &key) noexcept;

// The two buckets a key may live in, from the two halves of its tag:
// independent, and different when the table has more than one bucket.
struct BucketPair {
    size_t first;
    size_t second;
};

BucketPair candidate_buckets(uint64_t tag, size_t buckets) noexcept;

// A bucket's recency word: its low 28 bits are the slots' numbers, a
// nibble each, from the most recently used (rank 0) to the least (rank
// 6); bits 32 to 38 mark slots reserved for a key not yet committed,
// which no other key may take meanwhile.
constexpr uint64_t kFreshOrder = 0x6543210;

constexpr unsigned
order_slot(uint64_t order, unsigned rank) noexcept
{
    return static_cast<unsigned>(order >> (4 * rank)) & 0xf;
}

// The slot moved to rank 0 (most recent), or to the last rank (an emptied
// slot, to be taken first); the reserved bits are kept.
uint64_t order_touch(uint64_t order, unsigned slot) noexcept;
uint64_t order_drop(uint64_t order, unsigned slot) noexcept;

constexpr uint64_t
reserved_bit(unsigned slot) noexcept
{
    return uint64_t{1} << (32 + slot);
}

// A strict zone's flights (Policy::take_flight()), kept apart from its
// slots, which have no word for them: a small array in the zone's shared
// memory, an entry per key's tag by the tag's low bits. A key whose entry
// another key took has lost its flight: its requests go to Redis, as they
// would without one.
struct FlightEntry {
    uint64_t tag;      // 0: none
    int64_t  until_us; // the flight's, Policy::take_flight(); < 0: failed
};

// The entries of a zone of `zone_bytes`: a power of two, at most 1024 and
// a 256th of the zone, at least 16.
size_t flight_entries(size_t zone_bytes) noexcept;

// The entry of the key whose tag is `tag`, among `entries` (a power of two).
constexpr size_t
flight_index(uint64_t tag, size_t entries) noexcept
{
    return static_cast<size_t>(tag & (entries - 1));
}

// The key's flight (0: none, or its entry is another key's).
constexpr int64_t
flight_of(const FlightEntry &entry, uint64_t tag) noexcept
{
    return entry.tag == tag ? entry.until_us : 0;
}

} // namespace throttle
