// SPDX-License-Identifier: BSD-2-Clause
// concurrent=, local zones: the places a key's requests hold, counted so
// that a worker that dies (SIGKILL, a crash) leaks none of them. Each
// place is counted in the bucket of a quarter lease its request last
// took or renewed it in; a worker renews the places of its requests in
// flight every quarter lease, moving them to the current bucket; a place
// lives until its bucket's start plus the lease. So a live request's
// place never ends, and a dead worker's places end within one lease of
// its last renewal. The strict twin is src/scripts/concurrent_*.lua (a
// place per member, its lease end as score).
#pragma once

#include "throttle/policy.hpp"

#include <cstddef>
#include <cstdint>

namespace throttle {

// A key's words (beside its state, as a sliding_log's ring): one bucket
// each, by its number modulo kLeaseBuckets. Places live a lease, four
// buckets, from their bucket's start: a bucket's word is reused by the
// bucket a lease later, once its places are over.
constexpr size_t kLeaseBuckets = 4;

struct PlaceRules {
    int64_t limit;    // places a key has, 1 to kMaxPlaces
    int64_t lease_us; // kMinLeaseUs or more

    // (a lease is counted as kLeaseBuckets whole buckets: a few
    // microseconds shorter when it does not divide)
    constexpr int64_t bucket_us() const noexcept
    {
        return lease_us / static_cast<int64_t>(kLeaseBuckets);
    }
};

// The places of a key held at now_us.
int64_t places_held(const PlaceRules &rules, const int64_t *buckets,
                    int64_t now_us) noexcept;

// A request takes a place if the key has one free: `admitted`, the places
// left after it, and the bucket its place is counted in (the request
// keeps it, to free or renew the place).
struct PlaceTaken {
    bool    admitted;
    int64_t places_left;
    int64_t bucket;
};
PlaceTaken take_place(const PlaceRules &rules, int64_t *buckets,
                      int64_t now_us) noexcept;

// The request counted in `bucket` has ended: its place is free (if its
// lease has not ended already).
void free_place(const PlaceRules &rules, int64_t *buckets, int64_t bucket,
                int64_t now_us) noexcept;

// The request counted in `bucket` is still in flight: its place moves to
// now's bucket, which it returns; -1 if its lease has ended (the place
// may have gone to another request: it is not taken back).
int64_t renew_place(const PlaceRules &rules, int64_t *buckets, int64_t bucket,
                    int64_t now_us) noexcept;

// The zones of concurrent=: what make_policy() gives them.
const Algorithm &concurrent_algorithm() noexcept;

// make_policy() for a concurrent= zone: it takes none of a rate zone's
// parameters, each refused with why.
Parsed<Policy> make_concurrent_policy(const ZoneParams &params,
                                      Message          &why) noexcept;

// Policy::renew() (which see), once the zone holds places.
int64_t renew_held_place(const Policy &policy, StoredKey &key, int64_t *log,
                         int64_t held_at_us, int64_t now_us) noexcept;

} // namespace throttle
