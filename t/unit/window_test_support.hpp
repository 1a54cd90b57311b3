// SPDX-License-Identifier: BSD-2-Clause
// What the fixed_window, sliding_window and sliding_log tests share: the
// clock, hand-worked step tables and the random timelines they walk against
// their reference models. Kept in one place so that the three algorithms are
// held to the same timelines; what differs per algorithm (the references,
// how a key is held) stays in each test.
#pragma once

#include "policy_support.hpp"
#include "throttle/policy.hpp"
#include "throttle/sliding_log.hpp"
#include "throttle/windows.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

namespace throttle::testing_support {

inline constexpr int64_t kMs = 1000;
inline constexpr int64_t kSecond = 1'000'000;
// A whole number of days since the epoch: every window starts on it.
inline constexpr int64_t kEpoch = 1'700'006'400'000'000;
// Fractions of a window that divide every window (1 s .. 1 day).
inline constexpr int64_t kGrainDivisors[] = {2, 4, 5, 10, 20, 25, 100, 1000};

// A hand-worked step: a request at now_ms after kEpoch and what it must get
// (retry_after_ms -1 for none).
struct Step {
    int64_t now_ms, cost;
    bool    limited;
    int64_t remaining, reset_after_ms, retry_after_ms;
};

// Slot: anything with Decision hit(const Policy &, int64_t now, int64_t cost).
template <class Slot>
void
run(const Policy &p, Slot &slot, const Step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const Step &s = steps[i];
        SCOPED_TRACE(testing::Message() << "step " << i << " t=" << s.now_ms
                                        << "ms cost=" << s.cost);
        ThrottleResult r = slot.hit(p, kEpoch + s.now_ms * kMs, s.cost).result;
        EXPECT_EQ(r.limited, s.limited);
        EXPECT_EQ(r.limit, p.limit);
        EXPECT_EQ(r.remaining, s.remaining);
        EXPECT_EQ(r.reset_after_us, s.reset_after_ms * kMs);
        EXPECT_EQ(r.retry_after_us,
                  s.retry_after_ms < 0 ? -1 : s.retry_after_ms * kMs);
    }
}

inline int64_t
uniform(std::mt19937_64 &rng, int64_t lo, int64_t hi)
{
    return lo
        + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

// 400 rounds of 3000 requests, each round a random policy of one algorithm
// and a random timeline for it. The test walks it with next_round() and
// next_step(), feeding the reference and the slot, so that its assertions
// stay in its own body. Everything is drawn from one generator in a fixed
// order: a seed names the same timelines whatever the test checks.
class RandomTimelines {
  public:
    // Each round draws its count up to one of count_bounds, chosen at
    // random; the burst up to the count (and kMaxBurst).
    RandomTimelines(std::string_view algorithm, uint64_t seed,
                    std::initializer_list<int64_t> count_bounds)
        : algorithm_(algorithm), rng_(seed), count_bounds_(count_bounds)
    {
    }

    // The next round's policy and starting time; false after the last.
    bool next_round()
    {
        if (++round_ == kRounds) {
            return false;
        }
        period_ = kPeriods[rng_() % std::size(kPeriods)];
        const int64_t count =
            uniform(rng_, 1, count_bounds_[rng_() % count_bounds_.size()]);
        const int64_t burst =
            rng_() % 2 ? 0 : uniform(rng_, 0, std::min(count, kMaxBurst));
        policy_ = make_test_policy(algorithm_, count, period_, burst);
        limit_ = policy_->limit;
        // Costs up to 1, a tenth of the limit or all of it; gaps so that the
        // load is a half to four times the limit. In doubles: period *
        // max_cost overflows at day windows and limits near 2^31.
        max_cost_ = std::max<int64_t>(
            1, rng_() % 3 == 0 ? 1 : limit_ / (1 + rng_() % 10));
        const int64_t load = 1 + static_cast<int64_t>(rng_() % 4);
        mean_gap_ = std::max<int64_t>(
            1,
            static_cast<int64_t>(
                static_cast<double>(period_) * static_cast<double>(max_cost_)
                / (static_cast<double>(limit_) * static_cast<double>(load))));
        // Half the timelines keep to a grid of a fraction of the window:
        // requests then land exactly on window starts and on expiries, and
        // weights come out as whole numbers, where rounding shows.
        grain_ = rng_() % 2
            ? 1
            : period_ / kGrainDivisors[rng_() % std::size(kGrainDivisors)];
        now_ =
            kEpoch + grain_ * uniform(rng_, 0, 100 * 86'400 * kSecond / grain_);
        step_ = -1;
        return true;
    }

    // The round's next request: its time and cost; false after the last.
    bool next_step()
    {
        if (step_ + 1 == kSteps) {
            return false;
        }
        step_++;
        steps_++;
        switch (rng_() % 16) {
        case 0:
            break; // the same microsecond
        case 1:
            now_ += grain_ * uniform(rng_, 0, period_ * 5 / 2 / grain_);
            break;
        default:
            now_ += grain_
                * uniform(rng_, 0, std::max<int64_t>(1, mean_gap_ / grain_));
            break;
        }
        switch (rng_() % 32) {
        case 0:
            cost_ = 0;
            break;
        case 1:
            cost_ = limit_ + uniform(rng_, 1, 3);
            break;
        case 2:
            cost_ = limit_;
            break;
        default:
            cost_ = uniform(rng_, 1, max_cost_);
            break;
        }
        return true;
    }

    const Policy &policy() const { return *policy_; }
    int64_t       period() const { return period_; }
    int64_t       limit() const { return limit_; }
    int64_t       now() const { return now_; }
    int64_t       cost() const { return cost_; }
    // Requests made so far, over all rounds.
    int64_t steps() const { return steps_; }

    // Built only for a failure: a trace per step would cost more than the
    // step.
    testing::Message where() const
    {
        return testing::Message()
            << "round " << round_ << " step " << step_ << " now " << now_
            << " cost " << cost_ << " limit " << limit_ << " window "
            << period_;
    }

  private:
    static constexpr int     kRounds = 400;
    static constexpr int     kSteps = 3000;
    static constexpr int64_t kPeriods[] = {kSecond, 60 * kSecond,
                                           3600 * kSecond, 86'400 * kSecond};

    std::string_view      algorithm_;
    std::mt19937_64       rng_;
    std::vector<int64_t>  count_bounds_;
    int                   round_ = -1;
    int                   step_ = -1;
    int64_t               steps_ = 0;
    std::optional<Policy> policy_;
    int64_t               period_ = 0, limit_ = 0, max_cost_ = 0;
    int64_t               mean_gap_ = 0, grain_ = 0, now_ = 0, cost_ = 0;
};

// The fields every algorithm must report as its reference does; the retry
// time and what is stored are checked by each test, as they differ. Call it
// under ASSERT_NO_FATAL_FAILURE.
inline void
assert_same_result(const ThrottleResult &got, const ThrottleResult &want,
                   const RandomTimelines &t)
{
    ASSERT_EQ(got.limited, want.limited) << t.where();
    ASSERT_EQ(got.limit, want.limit) << t.where();
    ASSERT_EQ(got.remaining, want.remaining) << t.where();
    ASSERT_EQ(got.reset_after_us, want.reset_after_us) << t.where();
}

} // namespace throttle::testing_support
