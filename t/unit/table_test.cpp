// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/table.hpp"

#include "policy_support.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace throttle {
namespace {

using namespace testing_support;

ZoneKey
key_of(const std::string &s)
{
    return ZoneKey(reinterpret_cast<const unsigned char *>(s.data()), s.size());
}

TEST(Table, TagsAreKeyedAndNeverZero)
{
    // (a ZoneKey points at its bytes: they must outlive it)
    const std::string a = "client-1", a2 = "client-1", b = "client-2";
    const SipKey      secret{0x1234, 0x5678};
    const ZoneKey     k = key_of(a);
    EXPECT_NE(key_tag(secret, k), 0u);
    EXPECT_EQ(key_tag(secret, k), key_tag(secret, key_of(a2)));
    EXPECT_NE(key_tag(secret, k), key_tag(secret, key_of(b)));
    EXPECT_NE(key_tag(secret, k), key_tag(SipKey{0x1234, 0x5679}, k));
}

TEST(Table, ADigestIsNotTheRawKeyOfItsBytes)
{
    const SipKey      secret{7, 9};
    const std::string long_key(300, 'x');
    const ZoneKey     hashed = key_of(long_key);
    ASSERT_TRUE(hashed.hashed());
    const ZoneKey raw = ZoneKey::stored(hashed.data(), hashed.size(), false);
    EXPECT_NE(key_tag(secret, hashed), key_tag(secret, raw));
}

TEST(Table, TwoDifferentBucketsInRange)
{
    std::set<size_t> firsts;
    for (uint64_t tag = 1; tag < 2000; tag++) {
        const uint64_t   t = tag * 0x9e3779b97f4a7c15ULL;
        const BucketPair b = candidate_buckets(t, 13);
        EXPECT_LT(b.first, 13u);
        EXPECT_LT(b.second, 13u);
        EXPECT_NE(b.first, b.second);
        firsts.insert(b.first);
    }
    EXPECT_EQ(firsts.size(), 13u);
    const BucketPair one = candidate_buckets(0xffffffffffffffffULL, 1);
    EXPECT_EQ(one.first, 0u);
    EXPECT_EQ(one.second, 0u);
}

TEST(Table, RecencyOrder)
{
    uint64_t o = kFreshOrder;
    EXPECT_EQ(order_slot(o, 0), 0u);
    EXPECT_EQ(order_slot(o, kBucketSlots - 1), 6u);

    o = order_touch(o, 4); // 4 0 1 2 3 5 6
    EXPECT_EQ(o, 0x6532104u);
    o = order_touch(o, 6); // 6 4 0 1 2 3 5
    EXPECT_EQ(order_slot(o, 0), 6u);
    EXPECT_EQ(order_slot(o, 6), 5u);
    o = order_drop(o, 6); // 4 0 1 2 3 5 6
    EXPECT_EQ(o, 0x6532104u);
    o = order_touch(o, 4); // already first: unchanged
    EXPECT_EQ(o, 0x6532104u);

    // the reserved bits stay
    const uint64_t r = (o | reserved_bit(3)) & ~uint64_t{0};
    EXPECT_EQ(order_touch(r, 5) & reserved_bit(3), reserved_bit(3));
    EXPECT_EQ(order_drop(r, 5) & reserved_bit(3), reserved_bit(3));

    // every slot once, whatever the moves
    for (unsigned s = 0; s < 50; s++) {
        o = s % 3 ? order_touch(o, s % 7) : order_drop(o, (s * 5) % 7);
        unsigned seen = 0;
        for (unsigned rank = 0; rank < kBucketSlots; rank++) {
            seen |= 1u << order_slot(o, rank);
        }
        EXPECT_EQ(seen, 0x7fu);
    }
}

TEST(TableSlots, GcraKeepsItsTatAndFence)
{
    for (Mode mode : {Mode::local, Mode::strict}) {
        const Policy p = make_test_policy("gcra", 5, 1'000'000, 0, mode);
        EXPECT_EQ(p.slot_words(), 2);
        StoredKey key;
        key.state.words[0] = 5'000;
        key.expire_at_us = 5'000;
        key.pending.since = 7'000;
        int64_t slot[2];
        p.store_slot(key, slot);
        StoredKey back;
        p.load_slot(slot, back);
        EXPECT_EQ(back.state.words[0], 5'000);
        EXPECT_EQ(back.expire_at_us, 5'000);
        EXPECT_EQ(back.pending.since, 7'000);
        EXPECT_EQ(p.slot_free_at(slot), 7'000);
    }
}

TEST(TableSlots, OtherAlgorithmsKeepFourWordsAndTheirLog)
{
    for (const char *name : {"fixed_window", "sliding_window", "sliding_log"}) {
        for (Mode mode : {Mode::local, Mode::strict}) {
            const Policy p = make_test_policy(name, 5, 1'000'000, 0, mode);
            EXPECT_EQ(p.slot_words(), 4 + p.log_slots) << name;
            int64_t   slot[16] = {};
            StoredKey key;
            key.expire_at_us = 9'000;
            key.state.words[0] = -3;
            key.state.words[1] = 11;
            key.pending.since = 2'000;
            p.store_slot(key, slot);
            StoredKey back;
            p.load_slot(slot, back);
            EXPECT_EQ(back.expire_at_us, 9'000);
            EXPECT_EQ(back.state.words[0], -3);
            EXPECT_EQ(back.state.words[1], 11);
            EXPECT_EQ(back.pending.since, 2'000);
            EXPECT_EQ(p.slot_free_at(slot), 9'000);
            EXPECT_EQ(p.slot_log(slot), slot + 4);
        }
    }
    const Policy c = concurrent_policy(3);
    EXPECT_EQ(c.slot_words(), 4 + 4);
}

TEST(TableSlots, AsyncZonesReferToTheirRecordInTheFencesWord)
{
    for (const char *name : {"gcra", "fixed_window", "sliding_window"}) {
        const Policy local = make_test_policy(name, 5, 1'000'000, 0);
        const Policy p = make_test_policy(name, 5, 1'000'000, 0, Mode::async);
        EXPECT_EQ(p.slot_words(), local.slot_words()) << name;
        int64_t slot[4] = {};
        EXPECT_EQ(local.slot_record(slot), nullptr) << name;
        int64_t *record = p.slot_record(slot);
        ASSERT_EQ(record, slot + p.slot_words() - 1) << name;
        *record = 0x1234;

        StoredKey key;
        key.expire_at_us = 9'000;
        key.state.words[0] = 9'000;
        key.pending = {3, 2'000};
        p.store_slot(key, slot);
        EXPECT_EQ(*record, 0x1234) << name; // the reference is kept
        EXPECT_EQ(p.slot_free_at(slot), 9'000) << name;

        StoredKey back;
        back.pending = {5, 4'000}; // the record's, as the glue loads them
        p.load_slot(slot, back);
        EXPECT_EQ(back.expire_at_us, 9'000) << name;
        EXPECT_EQ(back.pending.units, 5) << name;
        EXPECT_EQ(back.pending.since, 4'000) << name;
    }
}

TEST(TableSlots, AsyncZonesLeaveAQuarterOfTheirPagesToRecords)
{
    const Policy local = make_test_policy("gcra", 5, 1'000'000, 0);
    const Policy async = make_test_policy("gcra", 5, 1'000'000, 0, Mode::async);
    EXPECT_EQ(local.table_pages(257), 256u);
    EXPECT_EQ(async.table_pages(257), 192u);
    EXPECT_EQ(async.table_pages(0), 0u);
}

} // namespace
} // namespace throttle
