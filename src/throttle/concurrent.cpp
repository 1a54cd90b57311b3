// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/concurrent.hpp"

namespace throttle {

namespace {

// A bucket's word: its number in the high 40 bits, its count in the low
// 24. A zeroed word is bucket 0, empty: long over.
constexpr int     kCountBits = 24;
constexpr int64_t kCountMask = (int64_t{1} << kCountBits) - 1;

static_assert(kMaxPlaces <= kCountMask, "a bucket's count fits its bits");

constexpr int64_t
bucket_of(int64_t word) noexcept
{
    return static_cast<int64_t>(static_cast<uint64_t>(word) >> kCountBits);
}

constexpr int64_t
count_of(int64_t word) noexcept
{
    return word & kCountMask;
}

constexpr int64_t
word_of(int64_t bucket, int64_t count) noexcept
{
    return static_cast<int64_t>(static_cast<uint64_t>(bucket) << kCountBits
                                | static_cast<uint64_t>(count));
}

int64_t
now_bucket(const PlaceRules &rules, int64_t now_us) noexcept
{
    return now_us / rules.bucket_us();
}

// Whether places counted in `bucket` still live at now_us.
bool
lives(const PlaceRules &rules, int64_t bucket, int64_t now_us) noexcept
{
    return (bucket + static_cast<int64_t>(kLeaseBuckets)) * rules.bucket_us()
        > now_us;
}

int64_t &
slot(int64_t *buckets, int64_t bucket) noexcept
{
    return buckets[static_cast<size_t>(bucket) % kLeaseBuckets];
}

// Adds one place to now's bucket; the word of an older bucket there has
// ended (it is a lease old at least).
void
count_in(const PlaceRules &rules, int64_t *buckets, int64_t now_us) noexcept
{
    const int64_t bucket = now_bucket(rules, now_us);
    int64_t      &word = slot(buckets, bucket);
    const int64_t count = bucket_of(word) == bucket ? count_of(word) : 0;
    word = word_of(bucket, count + 1);
}

// Takes one place out of `bucket`; false if none is counted there alive.
bool
count_out(const PlaceRules &rules, int64_t *buckets, int64_t bucket,
          int64_t now_us) noexcept
{
    int64_t &word = slot(buckets, bucket);
    if (bucket < 0 || !lives(rules, bucket, now_us) || bucket_of(word) != bucket
        || count_of(word) == 0)
    {
        return false;
    }
    word = word_of(bucket, count_of(word) - 1);
    return true;
}

} // namespace

int64_t
places_held(const PlaceRules &rules, const int64_t *buckets,
            int64_t now_us) noexcept
{
    int64_t held = 0;
    for (size_t i = 0; i < kLeaseBuckets; i++) {
        if (lives(rules, bucket_of(buckets[i]), now_us)) {
            held += count_of(buckets[i]);
        }
    }
    return held;
}

PlaceTaken
take_place(const PlaceRules &rules, int64_t *buckets, int64_t now_us) noexcept
{
    const int64_t held = places_held(rules, buckets, now_us);
    if (held >= rules.limit) {
        return {false, 0, -1};
    }
    count_in(rules, buckets, now_us);
    return {true, rules.limit - held - 1, now_bucket(rules, now_us)};
}

void
free_place(const PlaceRules &rules, int64_t *buckets, int64_t bucket,
           int64_t now_us) noexcept
{
    (void) count_out(rules, buckets, bucket, now_us);
}

int64_t
renew_place(const PlaceRules &rules, int64_t *buckets, int64_t bucket,
            int64_t now_us) noexcept
{
    const int64_t now = now_bucket(rules, now_us);
    if (bucket == now && lives(rules, bucket, now_us)) {
        return bucket;
    }
    if (!count_out(rules, buckets, bucket, now_us)) {
        return -1;
    }
    count_in(rules, buckets, now_us);
    return now;
}

} // namespace throttle
