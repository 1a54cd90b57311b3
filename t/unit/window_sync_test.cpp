// Async mode for the window counters: a node's unsent units per window, and
// Redis's answer turned into the node's view.
#include "throttle/window_sync.hpp"

#include <gtest/gtest.h>

using namespace throttle;

namespace {

constexpr int64_t W = 60'000'000;     // r/m
constexpr int64_t S = 29'383'333 * W; // a window start, near 2025 in us

int64_t
pack(int64_t prev, int64_t cur)
{
    return (prev << 32) | cur;
}

} // namespace

TEST(WindowUnits, SameWindowAdds)
{
    WindowUnits u = merge_window_units(Algorithm::sliding_window, W,
                                       {pack(2, 3), S}, {pack(1, 4), S});
    EXPECT_EQ(u.since, S);
    EXPECT_EQ(window_units_prev(u.packed), 3);
    EXPECT_EQ(window_units_cur(u.packed), 7);
    EXPECT_EQ(window_units_total(u.packed), 10);
}

TEST(WindowUnits, ThePreviousWindowWeighsOnlyWhenSliding)
{
    // units of S, then a request in the next window
    WindowUnits u = merge_window_units(Algorithm::sliding_window, W,
                                       {pack(9, 5), S}, {1, S + W});
    EXPECT_EQ(u.since, S + W);
    EXPECT_EQ(window_units_prev(u.packed), 5); // S's units; S - W's gone
    EXPECT_EQ(window_units_cur(u.packed), 1);

    // the same in either order
    WindowUnits v = merge_window_units(Algorithm::sliding_window, W, {1, S + W},
                                       {pack(9, 5), S});
    EXPECT_EQ(v.packed, u.packed);
    EXPECT_EQ(v.since, u.since);

    // a fixed window's units of a window that is over weigh on nothing
    WindowUnits f =
        merge_window_units(Algorithm::fixed_window, W, {5, S}, {1, S + W});
    EXPECT_EQ(f.packed, 1);
    EXPECT_EQ(f.since, S + W);
}

TEST(WindowUnits, OlderWindowsAreDropped)
{
    WindowUnits u = merge_window_units(Algorithm::sliding_window, W,
                                       {pack(1, 5), S}, {2, S + 2 * W});
    EXPECT_EQ(u.packed, 2);
    EXPECT_EQ(u.since, S + 2 * W);
}

TEST(WindowUnits, NothingIsNothing)
{
    WindowUnits u =
        merge_window_units(Algorithm::fixed_window, W, {0, 0}, {3, S});
    EXPECT_EQ(u.packed, 3);
    EXPECT_EQ(u.since, S);
    u = merge_window_units(Algorithm::fixed_window, W, {3, S}, {0, 0});
    EXPECT_EQ(u.packed, 3);
    EXPECT_EQ(u.since, S);
}

TEST(SyncedWindowState, RedisCountsPlusWhatTheNodeAdmittedSince)
{
    KeyState      state;
    int64_t       expire_at = 0;
    const int64_t sent_at = S + 10'000'000;
    const int64_t counts[] = {7, 4}; // previous, current

    // Redis was 10.0004 s into the window when it answered
    ASSERT_TRUE(synced_window_state(Algorithm::sliding_window, W, sent_at,
                                    10'000'400, counts, {pack(0, 2), S},
                                    sent_at + 900, state, expire_at));
    EXPECT_EQ(state.words[0], S);
    EXPECT_EQ(state.words[1], pack(7, 6));
    EXPECT_EQ(expire_at, S + 2 * W);

    const int64_t fixed[] = {11};
    ASSERT_TRUE(synced_window_state(Algorithm::fixed_window, W, sent_at,
                                    9'999'000, fixed, {3, S}, sent_at + 900,
                                    state, expire_at));
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
    ASSERT_TRUE(synced_window_state(Algorithm::fixed_window, W, sent_at, 20'000,
                                    counts, {0, 0}, S + W + 1, state,
                                    expire_at));
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
    EXPECT_FALSE(synced_window_state(Algorithm::fixed_window, W, sent_at,
                                     W - 1'000, counts, {0, 0}, S + W + 500,
                                     state, expire_at));
    EXPECT_EQ(state.words[0], 42);
    EXPECT_EQ(expire_at, 43);
}

// The pending units of any algorithm, as the zone keeps them between syncs.
TEST(PendingUnits, GcraCountsFromTheFirstUnit)
{
    const Policy gcra = *make_policy(Algorithm::gcra, Rate{1, W}, 9).value;
    PendingUnits p = charge_pending(gcra, {}, 2, S + 5, KeyState{});
    EXPECT_EQ(p.units, 2);
    EXPECT_EQ(p.since, S + 5);
    p = charge_pending(gcra, p, 3, S + 9, KeyState{});
    EXPECT_EQ(p.units, 5);
    EXPECT_EQ(p.since, S + 5); // the first unit's time stays

    // units a failed sync took back go first
    PendingUnits m = merge_pending(gcra, {4, S + 1}, p);
    EXPECT_EQ(m.units, 9);
    EXPECT_EQ(m.since, S + 1);
    m = merge_pending(gcra, {0, S + 1}, p);
    EXPECT_EQ(m.units, 5);
    EXPECT_EQ(m.since, S + 5);
    EXPECT_EQ(pending_total(gcra, 9), 9);
}

TEST(PendingUnits, WindowCountersCountPerWindow)
{
    const Policy sliding =
        *make_policy(Algorithm::sliding_window, Rate{10, W}, 0).value;
    KeyState state;
    state.words[0] = S; // the window the request counted in
    PendingUnits p = charge_pending(sliding, {}, 2, S + 5, state);
    EXPECT_EQ(p.units, 2);
    EXPECT_EQ(p.since, S);
    state.words[0] = S + W;
    p = charge_pending(sliding, p, 1, S + W + 5, state);
    EXPECT_EQ(p.units, pack(2, 1));
    EXPECT_EQ(p.since, S + W);
    EXPECT_EQ(pending_total(sliding, p.units), 3);

    PendingUnits m = merge_pending(sliding, {4, S}, p);
    EXPECT_EQ(m.units, pack(6, 1));
    EXPECT_EQ(m.since, S + W);
}
