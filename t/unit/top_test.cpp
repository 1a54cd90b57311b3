// SPDX-License-Identifier: BSD-2-Clause
// The heavy-hitters table of top= (top.hpp): exact while it has room,
// space-saving's bounds once full, the decay, the answer's order, names.
// The model is what top.hpp says a count means: one counter per key,
// halved (rounded down) at the end of each decay period.
#include "throttle/top.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace throttle {
namespace {

constexpr int64_t kDecayMs = 1000;
constexpr int64_t kT0Ms = 1'764'205'262'000; // a period's start

ZoneKey
key_of(const std::string &s)
{
    return ZoneKey(reinterpret_cast<const unsigned char *>(s.data()), s.size());
}

// Tags stand for key_tag(): distinct keys, distinct tags, never 0.
uint64_t
tag_of(int key)
{
    return 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(key + 1);
}

std::string
name_of(int key)
{
    return "key-" + std::to_string(key);
}

// The table and its model: every key's own halved counter.
class TopModel {
  public:
    explicit TopModel(size_t size)
        : entries_(size),
          table_(top_table(entries_.data(), size, kDecayMs, kT0Ms))
    {
    }

    void reject(int key, int64_t now_ms)
    {
        advance(now_ms);
        counters_[key]++;
        const std::string name = name_of(key);
        top_record(table_, tag_of(key), key_of(name), now_ms);
    }

    // The model's counters halved to now, as the table's will be.
    void advance(int64_t now_ms)
    {
        const int64_t period = now_ms / kDecayMs;
        for (; period_ < period; period_++) {
            for (auto &[key, n] : counters_) {
                n /= 2;
            }
        }
    }

    const TopEntry *entry_of(int key) const
    {
        for (const TopEntry &e : entries_) {
            if (e.tag == tag_of(key)) {
                return &e;
            }
        }
        return nullptr;
    }

    // Decays the table to now (as a read does), then checks it against
    // the model; `exact`: no key was ever evicted.
    void check(int64_t now_ms, bool exact)
    {
        advance(now_ms);
        top_decay(table_, now_ms);
        int64_t least = INT64_MAX;
        size_t  used = 0;
        for (const TopEntry &e : entries_) {
            if (e.tag != 0) {
                used++;
                least = std::min(least, e.count);
            }
        }
        for (const auto &[key, n] : counters_) {
            const TopEntry *e = entry_of(key);
            if (exact) {
                ASSERT_EQ(e ? e->count : 0, n) << name_of(key);
                ASSERT_EQ(e ? e->error : 0, 0) << name_of(key);
                continue;
            }
            if (e == nullptr) {
                // a key left out has had at most the least count
                ASSERT_TRUE(used == entries_.size() ? n <= least : n == 0)
                    << name_of(key) << ": " << n << " > " << least;
                continue;
            }
            ASSERT_GE(e->error, 0);
            ASSERT_LE(e->count - e->error, n) << name_of(key);
            ASSERT_GE(e->count, n) << name_of(key);
        }
    }

    std::vector<TopEntry>  entries_;
    TopTable               table_;
    std::map<int, int64_t> counters_;
    int64_t                period_ = kT0Ms / kDecayMs;
};

TEST(Top, EntriesByZoneSize)
{
    EXPECT_EQ(top_entries(32 * 1024), kTopMinEntries);
    EXPECT_EQ(top_entries(256 * 1024), 16u);
    EXPECT_EQ(top_entries(512 * 1024), 32u);
    EXPECT_EQ(top_entries(1024 * 1024), kTopMaxEntries);
    EXPECT_EQ(top_entries(size_t{1} << 30), kTopMaxEntries);
}

TEST(Top, CountsAKeysRejectionsAndTheirTimes)
{
    TopModel m(8);
    m.reject(1, kT0Ms + 10);
    m.reject(1, kT0Ms + 20);
    m.reject(2, kT0Ms + 30);
    m.reject(1, kT0Ms + 40);

    const TopEntry *e = m.entry_of(1);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->count, 3);
    EXPECT_EQ(e->error, 0);
    EXPECT_EQ(e->first_ms, kT0Ms + 10);
    EXPECT_EQ(e->last_ms, kT0Ms + 40);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(e->name), e->name_len),
              "key-1");
    EXPECT_EQ(e->key_len, 5);
    EXPECT_EQ(e->hashed, 0);
    m.check(kT0Ms + 50, true);
}

// A rejection counts 1 in its period, then halves at the end of each:
// 8 rejections are 4 in the next period, 2, 1, then gone (a free entry).
TEST(Top, CountsHalveEachPeriodAndLeaveAtZero)
{
    TopModel m(8);
    for (int i = 0; i < 8; i++) {
        m.reject(1, kT0Ms + 999);
    }
    m.reject(2, kT0Ms + 999);

    int64_t expected = 8;
    for (int64_t p = 1; p <= 4; p++) {
        expected /= 2;
        m.check(kT0Ms + p * kDecayMs, true);
        const TopEntry *e = m.entry_of(1);
        ASSERT_EQ(e ? e->count : 0, expected) << "after " << p << " periods";
        EXPECT_EQ(m.entry_of(2), nullptr) << "1 is 0 after one period";
    }

    // a key that comes back after leaving starts afresh
    m.reject(1, kT0Ms + 5 * kDecayMs + 7);
    EXPECT_EQ(m.entry_of(1)->count, 1);
    EXPECT_EQ(m.entry_of(1)->first_ms, kT0Ms + 5 * kDecayMs + 7);
}

TEST(Top, ALongGapOrAClockGoneBackAreSafe)
{
    TopModel m(8);
    m.reject(1, kT0Ms);
    m.reject(1, kT0Ms);

    // the clock steps back: no halving until it is past the period again
    top_decay(m.table_, kT0Ms - 5 * kDecayMs);
    EXPECT_EQ(m.entry_of(1)->count, 2);
    m.reject(1, kT0Ms - 5 * kDecayMs);
    EXPECT_EQ(m.entry_of(1)->count, 3);
    EXPECT_EQ(m.entry_of(1)->last_ms, kT0Ms) << "the last is the latest";

    // a gap of more periods than a count has bits
    top_decay(m.table_, kT0Ms + 1000 * kDecayMs);
    EXPECT_EQ(m.entry_of(1), nullptr);
}

TEST(Top, ANewDecayAppliesFromNow)
{
    TopModel m(8);
    for (int i = 0; i < 16; i++) {
        m.reject(1, kT0Ms);
    }
    // one period of the old decay has ended: 8; then 10 s periods, which
    // end at multiples of 10 s of the Unix clock
    const int64_t set_at = kT0Ms + kDecayMs + 500;
    const int64_t next = (set_at / 10'000 + 1) * 10'000;
    top_set_decay(m.table_, 10 * kDecayMs, set_at);
    EXPECT_EQ(m.entry_of(1)->count, 8);
    top_decay(m.table_, next - 1);
    EXPECT_EQ(m.entry_of(1)->count, 8);
    top_decay(m.table_, next);
    EXPECT_EQ(m.entry_of(1)->count, 4);
}

// The randomized check of the exact part: fewer keys than entries, any
// order, times spread over several periods: every count is the model's.
TEST(Top, ExactWhileEveryKeyHasAnEntry)
{
    const unsigned seed = std::random_device{}();
    std::mt19937   rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));

    for (int round = 0; round < 50; round++) {
        TopModel  m(kTopMaxEntries);
        int64_t   now = kT0Ms;
        const int keys = 1 + static_cast<int>(rng() % kTopMaxEntries);
        for (int i = 0; i < 2000; i++) {
            now += static_cast<int64_t>(rng() % 20);
            m.reject(static_cast<int>(rng() % keys), now);
            if (rng() % 100 == 0) {
                m.check(now, true);
            }
        }
        m.check(now + static_cast<int64_t>(rng() % 5000), true);
    }
}

// The randomized check of the bound: many more keys than entries, a few
// heavy, most rare; at any time, count - error <= counter <= count, and a
// key left out had at most the least count.
TEST(Top, SpaceSavingBoundsOnceFull)
{
    const unsigned seed = std::random_device{}();
    std::mt19937   rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));

    for (int round = 0; round < 20; round++) {
        TopModel m(16);
        int64_t  now = kT0Ms;
        for (int i = 0; i < 20000; i++) {
            now += static_cast<int64_t>(rng() % 3);
            // half the rejections to 4 heavy keys, the rest to 400
            const int key = rng() % 2 == 0 ? static_cast<int>(rng() % 4)
                                           : 4 + static_cast<int>(rng() % 400);
            m.reject(key, now);
            if (rng() % 500 == 0) {
                m.check(now, false);
            }
        }
        m.check(now, false);
        // the heavy keys stand out of the noise: all four are in
        for (int key = 0; key < 4; key++) {
            EXPECT_NE(m.entry_of(key), nullptr) << name_of(key);
        }
    }
}

// A newcomer to a full table takes the entry of the least count, the
// least recently rejected of those, and inherits its count as its error.
TEST(Top, ANewcomerTakesTheLeastCount)
{
    TopModel m(kTopMinEntries);
    for (int key = 0; key < 8; key++) {
        for (int i = 0; i <= key % 4; i++) {
            m.reject(key, kT0Ms + key);
        }
    }
    // keys 0 and 4 have 1 each; 0 was rejected less recently
    m.reject(100, kT0Ms + 100);
    EXPECT_EQ(m.entry_of(0), nullptr);
    ASSERT_NE(m.entry_of(4), nullptr);
    const TopEntry *e = m.entry_of(100);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->count, 2);
    EXPECT_EQ(e->error, 1);
    EXPECT_EQ(e->first_ms, kT0Ms + 100);
}

TEST(Top, RankOrdersByCountThenErrorThenRecency)
{
    TopModel m(kTopMinEntries);
    m.reject(1, kT0Ms + 1);
    m.reject(2, kT0Ms + 2);
    m.reject(2, kT0Ms + 3);
    m.reject(3, kT0Ms + 4);

    std::vector<TopEntry> copy = m.entries_;
    ASSERT_EQ(top_rank(copy.data(), copy.size()), 3u);
    EXPECT_EQ(copy[0].tag, tag_of(2));
    EXPECT_EQ(copy[1].tag, tag_of(3)) << "1 each: the most recent first";
    EXPECT_EQ(copy[2].tag, tag_of(1));
    EXPECT_EQ(copy[3].tag, 0u);

    // with equal counts, the one more sure of its count first
    copy[0].count = copy[1].count = 5;
    copy[0].error = 3;
    copy[1].error = 0;
    top_rank(copy.data(), copy.size());
    EXPECT_EQ(copy[0].tag, tag_of(3));
}

TEST(Top, LongKeysAreCutAndHashedKeysKeepTheirDigest)
{
    TopModel          m(kTopMinEntries);
    const std::string cut(200, 'c'), hashed(300, 'h');
    top_record(m.table_, 11, key_of(cut), kT0Ms);
    top_record(m.table_, 12, key_of(hashed), kT0Ms);

    const TopEntry *e = nullptr;
    for (const TopEntry &x : m.entries_) {
        e = x.tag == 11 ? &x : e;
    }
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->name_len, kTopNameMax);
    EXPECT_EQ(e->key_len, 200);
    EXPECT_EQ(e->hashed, 0);

    const ZoneKey digest = key_of(hashed);
    for (const TopEntry &x : m.entries_) {
        e = x.tag == 12 ? &x : e;
    }
    EXPECT_EQ(e->hashed, 1);
    EXPECT_EQ(e->name_len, kKeyDigestLen);
    EXPECT_EQ(e->key_len, kKeyDigestLen);
    EXPECT_EQ(0, std::memcmp(e->name, digest.data(), kKeyDigestLen));
}

} // namespace
} // namespace throttle
