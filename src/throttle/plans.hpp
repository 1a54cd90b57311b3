// SPDX-License-Identifier: BSD-2-Clause
// Plans: a zone whose rate= or burst= is a variable (docs/plans.md). Its
// policy (make_policy()) is a template: the algorithm, the mode, log_max=,
// the sync interval, and what sizes the zone's memory, which no request
// changes. Each request has a policy of its own, made from the template
// and the texts its variables gave, by the same configuration rules; a
// worker keeps the ones it made last (PlanCache), so that a request whose
// texts it has seen parses nothing.
//
// A key's state carries over from one plan to the next as it is: each
// algorithm reads it under the request's policy (docs/plans.md says what
// that means for each).
#pragma once

#include "throttle/parse.hpp"
#include "throttle/policy.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace throttle {

// The texts a request's variables gave for rate= and burst=; each is read
// only if the zone's is a variable.
struct PlanTexts {
    std::string_view rate;
    std::string_view burst;
};

// The request's policy: the zone's template with the rate and burst the
// texts give, under the rules of make_policy(); or why not (the text, in
// `why`, names the value: `rate "fast" must look like 30r/m ...`).
Parsed<Policy> make_plan(const Policy &zone, const PlanTexts &texts,
                         Message &why) noexcept;

// Why make_policy() refused a zone's template (configure()'s text in
// `why`): for a zone whose rate= or burst= is a variable, that text
// speaks of the smallest value, which it says.
const char *template_refusal(const Policy &p, Message &why) noexcept;

// An async key's rate, as the record of a key due a sync keeps it (its
// sync needs its latest plan's rate, not its burst): the count in 30 bits
// (at most 1e9) and the unit in 2.
uint32_t pack_rate(Rate rate) noexcept;

// The policy an async key due a sync is synced with: the zone's template
// with the rate its record keeps (its latest request's), or the template
// itself in a zone whose rate= is constant.
Policy synced_plan(const Policy &zone, uint32_t packed_rate) noexcept;

// The policies a worker made last for a zone's requests, by their texts.
// Plain memory, zeroed or default-made; owned by the caller, which keeps
// one per zone and per worker (no lock).
class PlanCache {
  public:
    // How many it keeps, and the longest text it keeps one for (a longer
    // one is parsed each time: no valid value is that long).
    static constexpr size_t kEntries = 16;
    static constexpr size_t kMaxText = 22;

    // The policy for these texts: a copy of one made before, or one made
    // now (and kept, in place of the one made longest ago); or why not.
    // The pointer is good until the next call: a caller that needs the
    // policy longer copies it.
    Parsed<const Policy *> find(const Policy &zone, const PlanTexts &texts,
                                Message &why) noexcept;

  private:
    struct Entry {
        uint8_t rate_len = 0;
        uint8_t burst_len = 0;
        bool    used = false;
        char    rate[kMaxText] = {};
        char    burst[kMaxText] = {};
        Policy  policy{};
    };

    Entry  entries_[kEntries];
    size_t next_ = 0; // the entry a miss takes
};

} // namespace throttle
