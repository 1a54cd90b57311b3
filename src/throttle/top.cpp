// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/top.hpp"

#include <algorithm>
#include <cstring>

namespace throttle {

size_t
top_entries(size_t zone_bytes) noexcept
{
    return std::clamp(zone_bytes / 16384, kTopMinEntries, kTopMaxEntries);
}

TopTable
top_table(TopEntry *entries, size_t size, int64_t decay_ms,
          int64_t now_ms) noexcept
{
    return TopTable{entries, size, decay_ms, now_ms / decay_ms};
}

// Halves an entry `halvings` times as its key's own counter would be, each
// time rounded down: count' = count / 2^k. Its guaranteed part, count -
// error (at most the counter), is halved so too, which keeps it at most
// the counter halved: the error is what is left between them.
static void
halve(TopEntry &e, int64_t halvings) noexcept
{
    if (halvings >= 63) {
        e = TopEntry{};
        return;
    }

    const int64_t sure = (e.count - e.error) >> halvings;

    e.count >>= halvings;
    e.error = e.count - sure;

    if (e.count == 0) {
        e = TopEntry{}; // its counter is 0 too: the entry is free
    }
}

void
top_decay(TopTable &table, int64_t now_ms) noexcept
{
    const int64_t period = now_ms / table.decay_ms;

    if (period <= table.period) {
        return;
    }

    for (size_t i = 0; i < table.size; i++) {
        if (table.entries[i].tag != 0) {
            halve(table.entries[i], period - table.period);
        }
    }

    table.period = period;
}

void
top_set_decay(TopTable &table, int64_t decay_ms, int64_t now_ms) noexcept
{
    top_decay(table, now_ms);
    table.decay_ms = decay_ms;
    table.period = now_ms / decay_ms;
}

// The name a key is shown by: the key as the zone stores it (a long key's
// digest), cut at kTopNameMax bytes.
static void
name_entry(TopEntry &e, const ZoneKey &key) noexcept
{
    e.key_len = static_cast<uint8_t>(std::min<size_t>(key.size(), 255));
    e.name_len = static_cast<uint8_t>(std::min(key.size(), kTopNameMax));
    e.hashed = key.hashed() ? 1 : 0;
    std::memcpy(e.name, key.data(), e.name_len);
}

void
top_record(TopTable &table, uint64_t tag, const ZoneKey &key,
           int64_t now_ms) noexcept
{
    TopEntry *found = nullptr, *free_entry = nullptr, *least = nullptr;

    top_decay(table, now_ms);

    for (size_t i = 0; i < table.size && found == nullptr; i++) {
        TopEntry &e = table.entries[i];

        if (e.tag == tag) {
            found = &e;
        } else if (e.tag == 0) {
            free_entry = free_entry ? free_entry : &e;
        } else if (least == nullptr || e.count < least->count
                   || (e.count == least->count && e.last_ms < least->last_ms))
        {
            least = &e;
        }
    }

    if (found) {
        found->count++;
        found->last_ms = std::max(found->last_ms, now_ms);
        return;
    }

    // A free entry means no key was ever evicted, or the counts of those
    // that were have halved down to 0 since: the newcomer's count is
    // exact. Otherwise it may have had up to the least count before.
    TopEntry     &e = free_entry ? *free_entry : *least;
    const int64_t inherited = free_entry ? 0 : least->count;

    e.tag = tag;
    e.count = inherited + 1;
    e.error = inherited;
    e.first_ms = now_ms;
    e.last_ms = now_ms;
    name_entry(e, key);
}

// Whether `a` comes before `b` in the answer.
static bool
ranks_before(const TopEntry &a, const TopEntry &b) noexcept
{
    if ((a.tag == 0) != (b.tag == 0)) {
        return b.tag == 0;
    }
    if (a.count != b.count) {
        return a.count > b.count;
    }
    if (a.error != b.error) {
        return a.error < b.error;
    }
    if (a.last_ms != b.last_ms) {
        return a.last_ms > b.last_ms;
    }
    const int cmp =
        std::memcmp(a.name, b.name, std::min(a.name_len, b.name_len));
    return cmp != 0 ? cmp < 0 : a.name_len < b.name_len;
}

size_t
top_rank(TopEntry *entries, size_t size) noexcept
{
    std::sort(entries, entries + size, ranks_before);

    size_t used = 0;
    while (used < size && entries[used].tag != 0) {
        used++;
    }
    return used;
}

} // namespace throttle
