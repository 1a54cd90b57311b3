// SPDX-License-Identifier: BSD-2-Clause
// A zone's most rejected keys, for throttle_api's top= (docs/api.md, "Who
// is being limited"): a small table of heavy hitters kept by the
// space-saving algorithm (Metwally, Agrawal, El Abbadi, 2005), updated
// only when the zone rejects a request, with counts that halve at the end
// of each decay period. The glue holds the table's memory (the zone's
// shared memory) and its lock; the rules are here.
//
// What a count means, exactly: each key has, in principle, a counter of
// its rejections that is halved, rounded down, at the end of every decay
// period (the periods are aligned on the Unix clock: they end at multiples
// of the decay). A key rejected 200 times in one period and 1000 in the
// next shows 1100. While the table has a free entry for every key it has
// seen, the table's count is that counter. Once a key comes in while the
// table is full, it takes the entry of the smallest count (space-saving),
// and inherits that count as its "error": from then on, for every entry,
//
//     count - error <= the key's counter <= count
//
// and a key whose counter is above the table's smallest count is in the
// table. Halving keeps both true (error' is chosen so), and a count that
// reaches 0 frees its entry.
#pragma once

#include "throttle/key.hpp"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace throttle {

// Bytes of a key's name an entry keeps: a longer key is shown cut.
constexpr size_t kTopNameMax = 64;

// Entries a zone's table has: kTopMaxEntries, fewer in a small zone,
// whose keys would miss the pages (7 KiB for 64 entries).
constexpr size_t kTopMaxEntries = 64;
constexpr size_t kTopMinEntries = 8;

// The decay period unless throttle_zone's top_decay= says otherwise, and
// the range it may say.
constexpr int64_t kTopDefaultDecayMs = 60'000;
constexpr int64_t kTopMinDecayMs = 1'000;
constexpr int64_t kTopMaxDecayMs = 86'400'000;

// One key's entry; a free one has tag 0.
struct TopEntry {
    uint64_t      tag;   // the key's tag in its zone (key_tag()): its identity
    int64_t       count; // its rejections, halved each decay period
    int64_t       error; // how much of count may be another key's
    int64_t       first_ms; // Unix ms: the first rejection since it came in
    int64_t       last_ms;  // Unix ms: its last rejection
    uint8_t       name_len; // bytes of name kept
    uint8_t       key_len;  // the key's length as the zone stores it
    uint8_t       hashed;   // the key is the SHA-256 digest of a long key
    unsigned char name[kTopNameMax];
};

// The table: its entries are the glue's memory, zeroed when it is made.
struct TopTable {
    TopEntry *entries;
    size_t    size;     // entries
    int64_t   decay_ms; // the decay period
    int64_t   period;   // the period the counts are of: Unix ms / decay_ms
};

// Shared memory holds both as they are: no constructor or destructor runs.
static_assert(std::is_trivially_copyable_v<TopEntry>);
static_assert(std::is_trivially_copyable_v<TopTable>);

// The entries of a zone of `zone_bytes`: a 16 KiB share of the zone each,
// from kTopMinEntries to kTopMaxEntries (a zone of 1 MiB or more has 64).
size_t top_entries(size_t zone_bytes) noexcept;

// A new table over `entries` (zeroed), decaying every `decay_ms`.
TopTable top_table(TopEntry *entries, size_t size, int64_t decay_ms,
                   int64_t now_ms) noexcept;

// Halves the counts once per decay period ended since the table's own
// (none when the clock went back: it waits for the clock).
void top_decay(TopTable &table, int64_t now_ms) noexcept;

// A new decay period (a reload changed top_decay=): the counts are decayed
// to now by the old period, and by the new one from now on.
void top_set_decay(TopTable &table, int64_t decay_ms, int64_t now_ms) noexcept;

// The zone rejected a request of the key whose tag is `tag` (never 0) at
// now_ms: its entry counts one more, or it takes a free entry, or the
// entry of the smallest count (of those, the least recently rejected).
void top_record(TopTable &table, uint64_t tag, const ZoneKey &key,
                int64_t now_ms) noexcept;

// Puts a copy of the entries in the answer's order: the highest count
// first; between equal counts, the smaller error, then the most recently
// rejected, then the name's bytes. Free entries go last. Returns how many
// are in use.
size_t top_rank(TopEntry *entries, size_t size) noexcept;

} // namespace throttle
