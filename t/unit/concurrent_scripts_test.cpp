// SPDX-License-Identifier: BSD-2-Clause
// concurrent=, strict zones: the scripts that take, give back and renew a
// key's places in a real redis-server (redis_fixture.hpp), on a clock the
// tests give them: places up to the limit, a release frees one, an ended
// lease frees one, a renewal keeps one for another lease but never gives
// back one whose lease has ended.
#include "redis_fixture.hpp"

#include "throttle/lua.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kLeaseUs = 60 * kSecond;

class ConcurrentScripts : public RedisScripts {
  protected:
    const std::string key = "t:streams:alice";
    const int64_t     t0 = realtime_now_us();

    // {admitted, places left, in flight}
    std::vector<int64_t> acquire(int64_t limit, const std::string &member,
                                 int64_t at_us)
    {
        Reply r = run(evalsha(lua::concurrent_acquire, key,
                              {std::to_string(limit), std::to_string(kLeaseUs),
                               member, std::to_string(at_us)}));
        return integers(lua::concurrent_acquire, r.get());
    }

    int64_t release(const std::string &member)
    {
        return integer(evalsha(lua::concurrent_release, key, {member}));
    }

    int64_t renew(const std::vector<std::string> &members, int64_t at_us)
    {
        std::vector<std::string> argv = {std::to_string(kLeaseUs),
                                         std::to_string(at_us)};
        argv.insert(argv.end(), members.begin(), members.end());
        return integer(evalsha(lua::concurrent_renew, key, argv));
    }
};

using Answer = std::vector<int64_t>;

TEST_F(ConcurrentScripts, PlacesUpToTheLimitThenNone)
{
    EXPECT_EQ(acquire(3, "r1", t0), (Answer{1, 2, 1}));
    EXPECT_EQ(acquire(3, "r2", t0), (Answer{1, 1, 2}));
    EXPECT_EQ(acquire(3, "r3", t0), (Answer{1, 0, 3}));
    EXPECT_EQ(acquire(3, "r4", t0), (Answer{0, 0, 3}));
    // a refused request holds nothing
    EXPECT_EQ(release("r4"), 0);
    // the key lasts as long as its last lease, no longer
    const int64_t pttl = integer({"PTTL", key});
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, kLeaseUs / 1000);
}

TEST_F(ConcurrentScripts, AReleaseFreesItsPlace)
{
    acquire(2, "r1", t0);
    acquire(2, "r2", t0);
    EXPECT_EQ(release("r1"), 1);
    EXPECT_EQ(release("r1"), 0); // once
    EXPECT_EQ(acquire(2, "r3", t0 + 1), (Answer{1, 0, 2}));
}

TEST_F(ConcurrentScripts, AnEndedLeaseFreesItsPlace)
{
    acquire(1, "r1", t0);
    EXPECT_EQ(acquire(1, "r2", t0 + kLeaseUs - 1), (Answer{0, 0, 1}));
    // r1's lease ends at t0 + lease: its nginx renewed it no more
    EXPECT_EQ(acquire(1, "r2", t0 + kLeaseUs), (Answer{1, 0, 1}));
    EXPECT_EQ(release("r1"), 0);
}

TEST_F(ConcurrentScripts, ARenewalKeepsThePlaceForAnotherLease)
{
    acquire(2, "r1", t0);
    acquire(2, "r2", t0);
    EXPECT_EQ(renew({"r1", "r2", "gone"}, t0 + kLeaseUs / 2), 2);
    // past the first leases, the places are still held
    EXPECT_EQ(acquire(2, "r3", t0 + kLeaseUs + 1), (Answer{0, 0, 2}));
    // and free once the renewed leases end
    EXPECT_EQ(acquire(2, "r3", t0 + kLeaseUs / 2 + kLeaseUs),
              (Answer{1, 1, 1}));
}

TEST_F(ConcurrentScripts, ARenewalTooLateGetsNoPlaceBack)
{
    acquire(1, "r1", t0);
    EXPECT_EQ(renew({"r1"}, t0 + kLeaseUs), 0);
    EXPECT_EQ(acquire(1, "r2", t0 + kLeaseUs), (Answer{1, 0, 1}));
    EXPECT_EQ(renew({"r1"}, t0 + kLeaseUs + 1), 0);
    EXPECT_EQ(integer({"ZCARD", key}), 1);
}

} // namespace
} // namespace throttle
