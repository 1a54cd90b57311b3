// SPDX-License-Identifier: BSD-2-Clause
// The table of a zone's most rejected keys (throttle/top.hpp), against a
// model that keeps every key's own counter: rejected keys one after the
// other, at times that cross decay periods (and step back), into a table
// smaller than the keys. After each rejection, the promises of top.hpp:
// every entry's count - error <= its key's counter <= count; a key left
// out of the table has a counter no larger than the smallest count (0
// while an entry is free); top_rank() puts the highest counts first.
//
// The input: the table's entries (8 to 16) and its decay (1 to 4 s), then
// one rejection per two bytes: the key (one of 40) and the milliseconds
// since the last (x 37; a byte of 255 steps back a second instead).
#include "support.hpp"

#include "throttle/top.hpp"

#include <array>
#include <string>

namespace throttle::fuzz {
namespace {

constexpr size_t kKeys = 40;

// What top.hpp calls a key's counter: its rejections, halved (rounded
// down) at the end of each decay period of the Unix clock.
struct Model {
    std::array<int64_t, kKeys> counter{};
    int64_t                    period = 0;

    void decay(int64_t now_ms, int64_t decay_ms)
    {
        const int64_t now_period = now_ms / decay_ms;

        for (; period < now_period; period++) {
            for (int64_t &c : counter) {
                c /= 2;
            }
        }
    }
};

const TopEntry *
entry_of(const TopTable &table, uint64_t tag)
{
    for (size_t i = 0; i < table.size; i++) {
        if (table.entries[i].tag == tag) {
            return &table.entries[i];
        }
    }
    return nullptr;
}

void
check(const TopTable &table, const Model &model)
{
    int64_t least = INT64_MAX;

    for (size_t i = 0; i < table.size; i++) {
        const TopEntry &e = table.entries[i];
        least = e.tag == 0 ? 0 : std::min(least, e.count);
        if (e.tag == 0) {
            continue;
        }
        expect(e.tag >= 1 && e.tag <= kKeys, "an entry holds a key recorded");
        const int64_t counter = model.counter[e.tag - 1];
        expect(e.count > 0 && e.error >= 0 && e.error <= e.count,
               "an entry in use has a count, and an error within it");
        expect(e.count - e.error <= counter && counter <= e.count,
               "count - error <= the key's counter <= count");
    }

    for (size_t k = 0; k < kKeys; k++) {
        if (entry_of(table, k + 1) == nullptr) {
            expect(model.counter[k] <= least,
                   "a key left out counts no more than the least count");
        }
    }
}

void
check_rank(const TopTable &table)
{
    std::array<TopEntry, 16> copy{};
    std::copy(table.entries, table.entries + table.size, copy.begin());
    const size_t used = top_rank(copy.data(), table.size);

    for (size_t i = 0; i < table.size; i++) {
        expect((copy[i].tag != 0) == (i < used), "the entries in use first");
        if (i > 0 && i < used) {
            expect(copy[i - 1].count >= copy[i].count,
                   "the highest count first");
        }
    }
}

} // namespace

void
fuzz_one(std::string_view input)
{
    if (input.size() < 2) {
        return;
    }

    std::array<TopEntry, 16> entries{};
    const size_t             size = 8 + static_cast<uint8_t>(input[0]) % 9;
    const int64_t decay_ms = 1'000 * (1 + static_cast<uint8_t>(input[1]) % 4);
    int64_t       now_ms = 1'700'000'000'000;
    TopTable      table = top_table(entries.data(), size, decay_ms, now_ms);
    Model         model;
    model.period = now_ms / decay_ms;

    for (size_t i = 2; i + 1 < input.size(); i += 2) {
        const size_t  k = static_cast<uint8_t>(input[i]) % kKeys;
        const uint8_t step = static_cast<uint8_t>(input[i + 1]);
        now_ms += step == 255 ? -1'000 : step * 37;

        const std::string name = "key-" + std::to_string(k);
        top_record(table, k + 1,
                   ZoneKey(reinterpret_cast<const unsigned char *>(name.data()),
                           name.size()),
                   now_ms);
        model.decay(now_ms, decay_ms);
        model.counter[k]++;
        check(table, model);
    }

    check_rank(table);
}

} // namespace throttle::fuzz
