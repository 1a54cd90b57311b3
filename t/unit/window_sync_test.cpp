// SPDX-License-Identifier: BSD-2-Clause
// Async mode for the window counters: a node's unsent units per window, and
// Redis's answer turned into the node's view.
#include "policy_support.hpp"
#include "throttle/window_sync.hpp"

#include <gtest/gtest.h>

using namespace throttle;
using namespace throttle::testing_support;

namespace {

constexpr int64_t W = 60'000'000;     // r/m
constexpr int64_t S = 29'383'333 * W; // a window start, near 2025 in us

int64_t
pack(int64_t prev, int64_t cur)
{
    return pack_counts(prev, cur);
}

constexpr PreviousWindow kSliding = PreviousWindow::weighs;
constexpr PreviousWindow kFixed = PreviousWindow::ignored;

} // namespace

TEST(WindowUnits, SameWindowAdds)
{
    PendingUnits u =
        merge_window_units(kSliding, W, {pack(2, 3), S}, {pack(1, 4), S});
    EXPECT_EQ(u.since, S);
    EXPECT_EQ(high_count(u.units), 3);
    EXPECT_EQ(low_count(u.units), 7);
    EXPECT_EQ((high_count(u.units) + low_count(u.units)), 10);
}

TEST(WindowUnits, ThePreviousWindowWeighsOnlyWhenSliding)
{
    // units of S, then a request in the next window
    PendingUnits u =
        merge_window_units(kSliding, W, {pack(9, 5), S}, {1, S + W});
    EXPECT_EQ(u.since, S + W);
    EXPECT_EQ(high_count(u.units), 5); // S's units; S - W's gone
    EXPECT_EQ(low_count(u.units), 1);

    // the same in either order
    PendingUnits v =
        merge_window_units(kSliding, W, {1, S + W}, {pack(9, 5), S});
    EXPECT_EQ(v.units, u.units);
    EXPECT_EQ(v.since, u.since);

    // a fixed window's units of a window that is over weigh on nothing
    PendingUnits f = merge_window_units(kFixed, W, {5, S}, {1, S + W});
    EXPECT_EQ(f.units, 1);
    EXPECT_EQ(f.since, S + W);
}

TEST(WindowUnits, OlderWindowsAreDropped)
{
    PendingUnits u =
        merge_window_units(kSliding, W, {pack(1, 5), S}, {2, S + 2 * W});
    EXPECT_EQ(u.units, 2);
    EXPECT_EQ(u.since, S + 2 * W);
}

TEST(WindowUnits, NothingIsNothing)
{
    PendingUnits u = merge_window_units(kFixed, W, {0, 0}, {3, S});
    EXPECT_EQ(u.units, 3);
    EXPECT_EQ(u.since, S);
    u = merge_window_units(kFixed, W, {3, S}, {0, 0});
    EXPECT_EQ(u.units, 3);
    EXPECT_EQ(u.since, S);
}

TEST(SyncedWindowState, RedisCountsPlusWhatTheNodeAdmittedSince)
{
    KeyState      state;
    int64_t       expire_at = 0;
    const int64_t sent_at = S + 10'000'000;
    const int64_t counts[] = {7, 4}; // previous, current

    // Redis was 10.0004 s into the window when it answered
    ASSERT_TRUE(synced_window_state(kSliding, W, sent_at, 10'000'400, counts,
                                    {pack(0, 2), S}, sent_at + 900, state,
                                    expire_at));
    EXPECT_EQ(state.words[0], S);
    EXPECT_EQ(state.words[1], pack(7, 6));
    EXPECT_EQ(expire_at, S + 2 * W);

    const int64_t fixed[] = {11};
    ASSERT_TRUE(synced_window_state(kFixed, W, sent_at, 9'999'000, fixed,
                                    {3, S}, sent_at + 900, state, expire_at));
    EXPECT_EQ(state.words[0], S);
    EXPECT_EQ(state.words[1], 14);
    EXPECT_EQ(expire_at, S + W);
}

TEST(SyncedWindowState, ClocksThatDisagreeALittleStillMatch)
{
    KeyState      state;
    int64_t       expire_at = 0;
    const int64_t counts[] = {5};

    // the node's clock is 30 ms behind Redis's: just before the node's
    // window turns, Redis is already 20 ms into the next one
    const int64_t sent_at = S + W - 10'000;
    ASSERT_TRUE(synced_window_state(kFixed, W, sent_at, 20'000, counts, {0, 0},
                                    S + W + 1, state, expire_at));
    EXPECT_EQ(state.words[0], S + W);
    EXPECT_EQ(state.words[1], 5);
}

TEST(SyncedWindowState, AnAnswerAboutAnotherWindowIsLeftAlone)
{
    KeyState state;
    state.words[0] = 42;
    int64_t       expire_at = 43;
    const int64_t counts[] = {5};

    // the window turned on the node between the sync and its answer
    const int64_t sent_at = S + W - 1'000;
    EXPECT_FALSE(synced_window_state(kFixed, W, sent_at, W - 1'000, counts,
                                     {0, 0}, S + W + 500, state, expire_at));
    EXPECT_EQ(state.words[0], 42);
    EXPECT_EQ(expire_at, 43);
}

// The pending units of any algorithm, as the zone keeps them between syncs.
TEST(PendingUnits, GcraCountsFromTheFirstUnit)
{
    const Policy gcra = make_test_policy("gcra", 1, W, 9, Mode::async);
    PendingUnits p =
        gcra.algorithm->syncing()->charge(gcra, {}, 2, S + 5, KeyState{});
    EXPECT_EQ(p.units, 2);
    EXPECT_EQ(p.since, S + 5);
    p = gcra.algorithm->syncing()->charge(gcra, p, 3, S + 9, KeyState{});
    EXPECT_EQ(p.units, 5);
    EXPECT_EQ(p.since, S + 5); // the first unit's time stays

    // units a failed sync took back go first
    PendingUnits m = gcra.merge_pending({4, S + 1}, p);
    EXPECT_EQ(m.units, 9);
    EXPECT_EQ(m.since, S + 1);
    m = gcra.merge_pending({0, S + 1}, p);
    EXPECT_EQ(m.units, 5);
    EXPECT_EQ(m.since, S + 5);
    EXPECT_EQ(gcra.pending_total({9, S}), 9);
}

TEST(PendingUnits, WindowCountersCountPerWindow)
{
    const Policy sliding =
        make_test_policy("sliding_window", 10, W, 0, Mode::async);
    KeyState state;
    state.words[0] = S; // the window the request counted in
    PendingUnits p =
        sliding.algorithm->syncing()->charge(sliding, {}, 2, S + 5, state);
    EXPECT_EQ(p.units, 2);
    EXPECT_EQ(p.since, S);
    state.words[0] = S + W;
    p = sliding.algorithm->syncing()->charge(sliding, p, 1, S + W + 5, state);
    EXPECT_EQ(p.units, pack(2, 1));
    EXPECT_EQ(p.since, S + W);
    EXPECT_EQ(sliding.pending_total(p), 3);

    PendingUnits m = sliding.merge_pending({4, S}, p);
    EXPECT_EQ(m.units, pack(6, 1));
    EXPECT_EQ(m.since, S + W);
}
