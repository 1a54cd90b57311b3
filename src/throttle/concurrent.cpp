// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/concurrent.hpp"

#include "throttle/lua.hpp"
#include "throttle/policy.hpp"

#include <algorithm>

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

namespace {

PlaceRules
place_rules(const Policy &policy) noexcept
{
    return {policy.limit, policy.lease_us};
}

// When the places counted in now's bucket end, and with them every place
// of the key (none is counted in a later bucket).
int64_t
last_place_end(const PlaceRules &rules, int64_t now_us) noexcept
{
    return (now_bucket(rules, now_us) + static_cast<int64_t>(kLeaseBuckets))
        * rules.bucket_us();
}

// A refused request may ask again in a second: places free when requests
// end, which no one can tell beforehand (docs/concurrent.md).
constexpr int64_t kRetryAfterUs = 1'000'000;

// concurrent= zones: a key's "units" are its requests in flight, one
// each. A request takes a place when it is admitted (record(), or the
// acquire script) and gives it back when it ends (a settle of -1: the
// zone's settle(), or the release script). It is not an algorithm=: the
// zone's parameters choose it (make_policy()).
class Concurrent final : public Algorithm {
  public:
    constexpr Concurrent() noexcept
        : Algorithm("concurrent", false, false, false)
    {
    }

    // make_policy() has set the limit and the lease.
    bool configure(Policy &policy, Message &) const noexcept override
    {
        policy.window_us = policy.lease_us;
        policy.log_slots = policy.mode == Mode::strict
            ? 0
            : static_cast<int64_t>(kLeaseBuckets);
        return true;
    }

    // A request takes one place whatever its cost (there is no cost= on a
    // concurrent zone's line, and throttle_api refuses these zones).
    Decision decide(const Policy &policy, const KeyState *, const int64_t *log,
                    int64_t now_us, int64_t) const noexcept override
    {
        const int64_t held =
            log ? places_held(place_rules(policy), log, now_us) : 0;
        Decision d;
        d.result.limit = policy.limit;
        d.result.reset_after_us = 0;
        if (held >= policy.limit) {
            d.result.limited = true;
            d.result.retry_after_us = kRetryAfterUs;
            return d;
        }
        d.result.remaining = policy.limit - held - 1;
        d.store = true;
        return d;
    }

    void record(const Policy &policy, const Decision &, int64_t now_us, int64_t,
                KeyState &, int64_t &expire_at_us,
                int64_t *log) const noexcept override
    {
        const PlaceRules rules = place_rules(policy);
        if (expire_at_us <= now_us) {
            // a new key's words, or a key whose places have all ended
            std::fill(log, log + kLeaseBuckets, 0);
        }
        (void) take_place(rules, log, now_us);
        expire_at_us = std::max(expire_at_us, last_place_end(rules, now_us));
    }

    // The request counted at reserved_at_us (its place's last renewal)
    // has ended; a charge never comes (no settle= on these zones).
    void settle(const Policy &policy, int64_t delta_units,
                int64_t reserved_at_us, int64_t now_us, KeyState &, int64_t &,
                int64_t *log) const noexcept override
    {
        const PlaceRules rules = place_rules(policy);
        if (delta_units < 0) {
            free_place(rules, log, now_bucket(rules, reserved_at_us), now_us);
        }
    }

    // The release script gives a place back, for a request another zone
    // refused or one that has ended; the charge script is never called
    // (see settle()), and would name no request's member if it were.
    StrictScripts strict_scripts() const noexcept override
    {
        return {&lua::concurrent_acquire, &lua::concurrent_release, 2,
                &lua::concurrent_release};
    }

    ScriptArgs decision_args(const Policy &policy,
                             int64_t) const noexcept override
    {
        return {{policy.limit, policy.lease_us, 0, 0}, 2};
    }

    ScriptArgs refund_args(const Policy &, int64_t,
                           const int64_t tokens[2]) const noexcept override
    {
        return {{tokens[0], tokens[1], 0, 0}, 2};
    }

    ScriptArgs charge_args(const Policy &, int64_t) const noexcept override
    {
        return {{0, 0, 0, 0}, 2};
    }

    // Nothing to remember: a place may free the moment after Redis said
    // there was none, so every request asks Redis.
    Decision remember(const Policy &, const KeyState *,
                      const ThrottleResult &answer, int64_t,
                      int64_t) const noexcept override
    {
        Decision d;
        d.result = answer;
        return d;
    }

    Decision recall(const Policy &policy, const KeyState *, int64_t, int64_t,
                    int64_t) const noexcept override
    {
        Decision d;
        d.result.limit = policy.limit;
        return d;
    }

    const char *why_no_delay() const noexcept override
    {
        return "it admits a request or refuses it, and holds none back";
    }

    const Syncing *syncing() const noexcept override { return nullptr; }

    const char *why_not_async() const noexcept override
    {
        return "a place must be taken in Redis before its request goes "
               "on, or two nginx could give away the same last place; use "
               "sync=strict";
    }
};

const Concurrent kConcurrent;

} // namespace

const Algorithm &
concurrent_algorithm() noexcept
{
    return kConcurrent;
}

int64_t
renew_held_place(const Policy &policy, StoredKey &key, int64_t *log,
                 int64_t held_at_us, int64_t now_us) noexcept
{
    const PlaceRules rules = place_rules(policy);
    if (key.expire_at_us <= now_us) {
        return -1; // every place of the key has ended
    }
    const int64_t bucket =
        renew_place(rules, log, now_bucket(rules, held_at_us), now_us);
    if (bucket < 0) {
        return -1;
    }
    key.expire_at_us =
        std::max(key.expire_at_us, last_place_end(rules, now_us));
    return now_us;
}

// A concurrent= zone: it takes none of a rate zone's parameters, each
// refused with why.
Parsed<Policy>
make_concurrent_policy(const ZoneParams &params, Message &why) noexcept
{
    const char *rate_param = params.rate.count || params.rate_varies ? "rate="
        : params.burst || params.burst_varies                        ? "burst="
        : params.algorithm ? "algorithm="
        : params.log_max   ? "log_max="
                           : nullptr;
    if (rate_param) {
        return {std::nullopt,
                why.format("\"%s\" is for a zone of a rate; \"concurrent=\" "
                           "limits requests in flight: give each its own "
                           "zone, and both to the location's \"throttle\"",
                           rate_param)
                    .text()};
    }

    const Algorithm &algorithm = concurrent_algorithm();
    if (params.mode == Mode::async) {
        return {std::nullopt,
                why.format("\"concurrent=\" cannot \"sync=async\": %s",
                           algorithm.why_not_async())
                    .text()};
    }

    Policy p;
    p.algorithm = &algorithm;
    p.mode = params.mode;
    p.limit = *params.concurrent;
    p.lease_us = params.lease_us.value_or(kDefaultLeaseUs);
    if (p.limit < 1 || p.limit > kMaxPlaces || p.lease_us < kMinLeaseUs) {
        return {std::nullopt,
                why.format("concurrent=%lld lease=%lldms is out of range",
                           static_cast<long long>(p.limit),
                           static_cast<long long>(p.lease_us / 1000))
                    .text()};
    }
    (void) algorithm.configure(p, why);
    return {p, nullptr};
}

} // namespace throttle
