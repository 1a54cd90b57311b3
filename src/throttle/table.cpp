// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/table.hpp"

namespace throttle {

uint64_t
key_tag(const SipKey &secret, const ZoneKey &key) noexcept
{
    SipKey k = secret;
    if (key.hashed()) {
        k.k1 ^= 1;
    }
    const uint64_t tag = siphash24(k, key.data(), key.size());
    return tag != 0 ? tag : 1;
}

BucketPair
candidate_buckets(uint64_t tag, size_t buckets) noexcept
{
    // (x * n) >> 32 maps a 32-bit x onto [0, n) without a division
    const uint64_t n = buckets;
    BucketPair     b{static_cast<size_t>(((tag & 0xffffffffU) * n) >> 32),
                 static_cast<size_t>(((tag >> 32) * n) >> 32)};
    if (b.second == b.first && buckets > 1) {
        b.second = (b.first + 1) % buckets;
    }
    return b;
}

namespace {

constexpr uint64_t kOrderMask = 0xfffffff;

unsigned
rank_of(uint64_t order, unsigned slot) noexcept
{
    for (unsigned r = 0; r < kBucketSlots; r++) {
        if (order_slot(order, r) == slot) {
            return r;
        }
    }
    return kBucketSlots - 1; // not a valid order: never the case
}

// The order without the nibble at `rank`, the ones after it moved up.
uint64_t
without_rank(uint64_t order, unsigned rank) noexcept
{
    const uint64_t low = order & ((uint64_t{1} << (4 * rank)) - 1);
    const uint64_t high = (order & kOrderMask) >> (4 * (rank + 1));
    return low | (high << (4 * rank));
}

} // namespace

uint64_t
order_touch(uint64_t order, unsigned slot) noexcept
{
    const uint64_t rest = without_rank(order, rank_of(order, slot));
    return (order & ~kOrderMask) | (((rest << 4) | slot) & kOrderMask);
}

uint64_t
order_drop(uint64_t order, unsigned slot) noexcept
{
    const uint64_t rest = without_rank(order, rank_of(order, slot));
    return (order & ~kOrderMask)
        | ((rest | (uint64_t{slot} << (4 * (kBucketSlots - 1)))) & kOrderMask);
}

} // namespace throttle
