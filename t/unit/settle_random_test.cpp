// SPDX-License-Identifier: BSD-2-Clause
// Settling (Policy::settle()) over random sequences: requests reserve a
// random cost, end in any order and are settled to a random use (0 to
// twice the reservation), while time goes on; each algorithm's key beside
// a small model written from the rules alone (a TAT for GCRA, a count per
// window for the window counters, the timestamps for sliding_log). Every
// decision's verdict and remaining units must agree, and its retry time
// where the model can say it plainly; the key must live while the model
// holds anything. Where the algorithm can sync=async, an async zone's key
// walks beside it: its state is the local key's to the word, and while
// nothing is synced its unsent units are what its window counters hold.
#include "throttle/policy.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <random>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

// GCRA as a TAT: a request fits if TAT + cost * T - tolerance <= now.
struct GcraModel {
    static constexpr bool kKnowsRetry = true;
    int64_t               t, tolerance, limit;
    int64_t               tat = 0;

    explicit GcraModel(const Policy &p)
        : t(p.emission_interval_us), tolerance(p.window_us), limit(p.limit)
    {
    }

    ThrottleResult decide(int64_t now, int64_t cost)
    {
        const int64_t  from = std::max(tat, now);
        const int64_t  after = from + cost * t;
        ThrottleResult r{false, limit, 0, 0, -1};
        if (after - tolerance > now) {
            r.limited = true;
            r.retry_after_us = cost <= limit ? after - tolerance - now : -1;
        } else {
            tat = after;
        }
        const int64_t ttl = (r.limited ? from : after) - now;
        r.remaining = tolerance > ttl ? (tolerance - ttl) / t : 0;
        r.reset_after_us = ttl;
        return r;
    }

    void settle(int64_t delta_units, int64_t, int64_t now)
    {
        tat = std::max(std::max(tat, now) + delta_units * t, now);
    }

    bool holds_anything(int64_t now) const { return tat > now; }
};

// Counts per window start: the window counters' model. `previous_weighs`
// for sliding_window.
struct WindowModel {
    int64_t                    w, limit;
    std::map<int64_t, int64_t> counts;

    int64_t start(int64_t now) const { return now - now % w; }

    void settle(int64_t delta_units, int64_t reserved_at_us, int64_t now,
                bool previous_weighs)
    {
        const int64_t current = start(now);
        const int64_t reserved = start(reserved_at_us);
        if (delta_units > 0) {
            counts[current] += delta_units;
        } else if (reserved == current
                   || (previous_weighs && reserved == current - w)) {
            counts[reserved] =
                std::max<int64_t>(0, counts[reserved] + delta_units);
        }
    }
};

struct FixedWindowModel : WindowModel {
    static constexpr bool kKnowsRetry = true;

    explicit FixedWindowModel(const Policy &p)
        : WindowModel{p.window_us, p.limit, {}}
    {
    }

    ThrottleResult decide(int64_t now, int64_t cost)
    {
        const int64_t  end = start(now) + w;
        int64_t       &n = counts[start(now)];
        ThrottleResult r{false, limit, 0, 0, -1};
        if (cost <= limit && n + cost <= limit) {
            n += cost;
        } else {
            r.limited = true;
            r.retry_after_us = cost <= limit ? end - now : -1;
        }
        r.remaining = std::max<int64_t>(0, limit - n);
        r.reset_after_us = n > 0 ? end - now : 0;
        return r;
    }

    void settle(int64_t delta_units, int64_t reserved_at_us, int64_t now)
    {
        WindowModel::settle(delta_units, reserved_at_us, now, false);
    }

    bool holds_anything(int64_t now) { return counts[start(now)] > 0; }
};

// The weight as docs/algorithms.md writes it, in doubles.
struct SlidingWindowModel : WindowModel {
    static constexpr bool kKnowsRetry = false;

    explicit SlidingWindowModel(const Policy &p)
        : WindowModel{p.window_us, p.limit, {}}
    {
    }

    ThrottleResult decide(int64_t now, int64_t cost)
    {
        const int64_t s = start(now);
        const double  weighted = static_cast<double>(counts[s - w])
                * static_cast<double>(w - (now - s)) / static_cast<double>(w)
            + static_cast<double>(counts[s]);
        const bool passes = cost <= limit
            && weighted + static_cast<double>(cost)
                <= static_cast<double>(limit);
        // grouped as sliding_window_decide() does, to round alike
        const double left = static_cast<double>(limit)
            - (passes ? weighted + static_cast<double>(cost) : weighted);
        if (passes) {
            counts[s] += cost;
        }
        ThrottleResult r{!passes, limit, 0, 0, -1};
        r.remaining = left > 0 ? static_cast<int64_t>(std::floor(left)) : 0;
        return r;
    }

    void settle(int64_t delta_units, int64_t reserved_at_us, int64_t now)
    {
        WindowModel::settle(delta_units, reserved_at_us, now, true);
    }

    bool holds_anything(int64_t now)
    {
        return counts[start(now)] > 0 || counts[start(now) - w] > 0;
    }
};

// The timestamps in the window, oldest first; time never goes back here.
struct SlidingLogModel {
    static constexpr bool kKnowsRetry = true;
    int64_t               w, limit;
    std::vector<int64_t>  log;

    explicit SlidingLogModel(const Policy &p) : w(p.window_us), limit(p.limit)
    {
    }

    void drop_left(int64_t now)
    {
        log.erase(log.begin(),
                  std::upper_bound(log.begin(), log.end(), now - w));
    }

    ThrottleResult decide(int64_t now, int64_t cost)
    {
        drop_left(now);
        const auto     n = static_cast<int64_t>(log.size());
        ThrottleResult r{false, limit, limit - n, 0, -1};
        if (cost <= limit && n + cost <= limit) {
            log.insert(log.end(), static_cast<size_t>(cost), now);
            r.remaining -= cost;
        } else {
            r.limited = true;
            if (cost <= limit) {
                r.retry_after_us =
                    log[static_cast<size_t>(n + cost - limit - 1)] + w - now;
            }
        }
        return r;
    }

    // A charge beyond a full log pushes the oldest out.
    void settle(int64_t delta_units, int64_t reserved_at_us, int64_t now)
    {
        drop_left(now);
        if (delta_units > 0) {
            log.insert(log.end(), static_cast<size_t>(delta_units), now);
            const auto kept = std::min(static_cast<size_t>(limit), log.size());
            log.erase(log.begin(), log.end() - static_cast<ptrdiff_t>(kept));
            return;
        }
        auto [from, to] =
            std::equal_range(log.begin(), log.end(), reserved_at_us);
        log.erase(from, from + std::min<int64_t>(-delta_units, to - from));
    }

    bool holds_anything(int64_t now)
    {
        drop_left(now);
        return !log.empty();
    }
};

struct Reservation {
    int64_t units;
    int64_t at_us;
};

// One round: a random policy of `algorithm`, then `kSteps` random steps on
// one key and its model. Requests end in any order, at most kOpen at once.
// An async key beside the local one: the same state, and (window
// counters) the same counts unsent, none of them synced yet.
void
expect_async_twin(const StoredSlot &local, const StoredSlot &async,
                  const Policy &p)
{
    ASSERT_EQ(async.held, local.held);
    ASSERT_EQ(async.key.state.words[0], local.key.state.words[0]);
    ASSERT_EQ(async.key.state.words[1], local.key.state.words[1]);
    ASSERT_EQ(async.key.expire_at_us, local.key.expire_at_us);
    if (p.algorithm->name != "gcra" && async.key.pending.units != 0
        && async.key.pending.since == local.key.state.words[0])
    {
        const int64_t counts = local.key.state.words[1];
        ASSERT_EQ(low_count(async.key.pending.units), low_count(counts));
        ASSERT_EQ(high_count(async.key.pending.units), high_count(counts));
    }
}

template <class Model>
void
walk(std::string_view algorithm, std::mt19937_64 &rng, int round,
     int64_t &rejected, int64_t &settled)
{
    constexpr int     kSteps = 2000;
    constexpr size_t  kOpen = 8;
    constexpr int64_t kPeriods[] = {kSecond, 60 * kSecond};
    const Policy      p = make_test_policy(algorithm, uniform(rng, 1, 10),
                                           kPeriods[rng() % 2], uniform(rng, 0, 5));
    const int64_t     window_us = p.window_us;
    Model             model(p);
    StoredSlot        slot;
    // (a copy of p: the same limits, whatever the mode derives)
    Policy     async_p = p;
    StoredSlot async_slot;
    async_p.mode = Mode::async;
    async_p.sync_interval_us = 100'000;
    const bool               syncs = p.algorithm->syncing() != nullptr;
    std::vector<Reservation> open;
    int64_t                  now = kEpoch + uniform(rng, 0, 86'400 * kSecond);

    for (int step = 0; step < kSteps; step++) {
        SCOPED_TRACE(testing::Message() << algorithm << " round " << round
                                        << " step " << step << " now " << now);
        const uint64_t what = rng() % 16;
        if (what < 7 && open.size() < kOpen) {
            // mostly a few units, now and then none or more than fit
            const int64_t        cost = what == 0 ? 0
                       : what == 1                ? p.limit + 1
                                   : uniform(rng, 1, (p.limit + 1) / 2);
            const ThrottleResult got = slot.hit(p, now, cost).result;
            if (syncs) {
                ASSERT_EQ(async_slot.hit(async_p, now, cost).result.limited,
                          got.limited);
            }
            const ThrottleResult want = model.decide(now, cost);
            ASSERT_EQ(got.limited, want.limited) << "cost " << cost;
            ASSERT_EQ(got.remaining, want.remaining) << "cost " << cost;
            if (Model::kKnowsRetry) {
                ASSERT_EQ(got.retry_after_us, want.retry_after_us);
            }
            rejected += got.limited ? 1 : 0;
            if (!got.limited && cost > 0) {
                open.push_back({cost, now});
            }
        } else if (what < 12 && !open.empty()) {
            const size_t      i = rng() % open.size();
            const Reservation r = open[i];
            open[i] = open.back();
            open.pop_back();
            const int64_t used = uniform(rng, 0, 2 * r.units);
            slot.settle(p, r.units, used, r.at_us, now);
            if (syncs) {
                async_slot.settle(async_p, r.units, used, r.at_us, now);
            }
            model.settle(used - r.units, r.at_us, now);
            settled++;
        } else {
            // up to a quarter of the window, now and then two windows
            now += uniform(rng, 0, what == 15 ? 2 * window_us : window_us / 4);
        }
        if (model.holds_anything(now)) {
            ASSERT_GT(slot.key.expire_at_us, now);
        }
        if (syncs) {
            ASSERT_NO_FATAL_FAILURE(expect_async_twin(slot, async_slot, p));
        }
    }
}

template <class Model>
void
walk_rounds(std::string_view algorithm, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    int64_t         rejected = 0;
    int64_t         settled = 0;
    for (int round = 0; round < 25; round++) {
        ASSERT_NO_FATAL_FAILURE(
            walk<Model>(algorithm, rng, round, rejected, settled));
    }
    // both verdicts, and thousands of settles, were seen
    EXPECT_GT(rejected, 5000);
    EXPECT_GT(settled, 5000);
}

TEST(SettleRandom, GcraMatchesItsTatModel)
{
    walk_rounds<GcraModel>("gcra", 20261201);
}

TEST(SettleRandom, FixedWindowMatchesItsCountsPerWindow)
{
    walk_rounds<FixedWindowModel>("fixed_window", 20261202);
}

TEST(SettleRandom, SlidingWindowMatchesItsCountsPerWindow)
{
    walk_rounds<SlidingWindowModel>("sliding_window", 20261203);
}

TEST(SettleRandom, SlidingLogMatchesItsTimestamps)
{
    walk_rounds<SlidingLogModel>("sliding_log", 20261204);
}

} // namespace
} // namespace throttle
