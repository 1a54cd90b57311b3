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

    // A request's member: the time and seq its acquire answered.
    struct Member {
        int64_t at_us = 0;
        int64_t seq = 0;
    };

    // {limited, limit, places left, reset_after, retry_after}; `taken`
    // is the member of an admitted request.
    std::vector<int64_t> acquire(int64_t limit, int64_t at_us,
                                 Member *taken = nullptr)
    {
        Reply                r = run(evalsha(lua::concurrent_acquire, key,
                                             {std::to_string(limit), std::to_string(kLeaseUs),
                                              std::to_string(at_us)}));
        std::vector<int64_t> v = integers(lua::concurrent_acquire, r.get());
        if (v.size() != 7) {
            ADD_FAILURE() << "a decision script's reply has 7 integers";
            return v;
        }
        if (taken) {
            *taken = {v[5], v[6]};
        }
        v.resize(5);
        return v;
    }

    int64_t release(const Member &m)
    {
        return integer(
            evalsha(lua::concurrent_release, key,
                    {std::to_string(m.at_us), std::to_string(m.seq)}));
    }

    int64_t renew(const Member &m, int64_t at_us)
    {
        return integer(
            evalsha(lua::concurrent_renew, key,
                    {std::to_string(kLeaseUs), std::to_string(m.at_us),
                     std::to_string(m.seq), std::to_string(at_us)}));
    }
};

using Answer = std::vector<int64_t>;

constexpr int64_t kRetryUs = 1'000'000;

TEST_F(ConcurrentScripts, PlacesUpToTheLimitThenNone)
{
    EXPECT_EQ(acquire(3, t0), (Answer{0, 3, 2, 0, -1}));
    EXPECT_EQ(acquire(3, t0), (Answer{0, 3, 1, 0, -1}));
    EXPECT_EQ(acquire(3, t0), (Answer{0, 3, 0, 0, -1}));
    EXPECT_EQ(acquire(3, t0), (Answer{1, 3, 0, 0, kRetryUs}));
    EXPECT_EQ(integer({"ZCARD", key}), 3);
    // the key lasts as long as its last lease, no longer
    const int64_t pttl = integer({"PTTL", key});
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, kLeaseUs / 1000);
}

// Requests of one microsecond each get a member of their own, even when
// another member has gone in between.
TEST_F(ConcurrentScripts, MembersOfOneMicrosecondDiffer)
{
    Member a, b, c;
    acquire(3, t0, &a);
    acquire(3, t0, &b);
    EXPECT_EQ(release(a), 1);
    acquire(3, t0, &c);
    EXPECT_EQ(a.at_us, t0);
    EXPECT_NE(b.seq, c.seq);
    EXPECT_EQ(integer({"ZCARD", key}), 2);
}

TEST_F(ConcurrentScripts, AReleaseFreesItsPlace)
{
    Member r1;
    acquire(2, t0, &r1);
    acquire(2, t0);
    EXPECT_EQ(release(r1), 1);
    EXPECT_EQ(release(r1), 0); // once
    EXPECT_EQ(acquire(2, t0 + 1), (Answer{0, 2, 0, 0, -1}));
}

TEST_F(ConcurrentScripts, AnEndedLeaseFreesItsPlace)
{
    Member r1;
    acquire(1, t0, &r1);
    EXPECT_EQ(acquire(1, t0 + kLeaseUs - 1)[0], 1);
    // r1's lease ends at t0 + lease: its nginx renewed it no more
    EXPECT_EQ(acquire(1, t0 + kLeaseUs), (Answer{0, 1, 0, 0, -1}));
    EXPECT_EQ(release(r1), 0);
}

TEST_F(ConcurrentScripts, ARenewalKeepsThePlaceForAnotherLease)
{
    Member r1, r2;
    acquire(2, t0, &r1);
    acquire(2, t0, &r2);
    EXPECT_EQ(renew(r1, t0 + kLeaseUs / 2), 1);
    EXPECT_EQ(renew(r2, t0 + kLeaseUs / 2), 1);
    EXPECT_EQ(renew(Member{t0, 99}, t0 + kLeaseUs / 2), 0);
    // past the first leases, the places are still held
    EXPECT_EQ(acquire(2, t0 + kLeaseUs + 1)[0], 1);
    // and free once the renewed leases end
    EXPECT_EQ(acquire(2, t0 + kLeaseUs / 2 + kLeaseUs),
              (Answer{0, 2, 1, 0, -1}));
}

TEST_F(ConcurrentScripts, ARenewalTooLateGetsNoPlaceBack)
{
    Member r1;
    acquire(1, t0, &r1);
    EXPECT_EQ(renew(r1, t0 + kLeaseUs), 0);
    EXPECT_EQ(acquire(1, t0 + kLeaseUs)[0], 0);
    EXPECT_EQ(renew(r1, t0 + kLeaseUs + 1), 0);
    EXPECT_EQ(integer({"ZCARD", key}), 1);
}

} // namespace
} // namespace throttle
