// SPDX-License-Identifier: BSD-2-Clause
// A zone as any throttle_zone that nginx -t accepts makes it, deciding a
// key's requests of any cost a client may set (cost=$variable: up to
// kMaxCost) at times of its clock, which may step back a little (the wall
// clock of the window algorithms, under NTP).
//
// Setup line: "<algorithm> <rate> <burst> <log_max> <local|async>", e.g.
// "sliding_log 10r/s 5 100 local", or "concurrent <places> <lease ms>"
// (a concurrent= zone: its requests take places, which the steps of the
// clock end as their leases do); an algorithm and parameters that
// make_policy() refuses play the README's zone. The rest of the input is
// the requests: per request, a step of the clock and a cost, as
// FuzzedDataProvider reads them.
#include "support.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <vector>

namespace throttle::fuzz {
namespace {

// "<algorithm> <rate> <burst> <log_max> <local|async>"
Policy
policy_of(SetupLine &setup)
{
    ZoneParams    params = zone_params(setup, Mode::local);
    const int64_t log_max = setup.count(kMaxLogMax, 0);
    if (log_max > 0) {
        params.log_max = log_max;
    }
    if (setup.word() == "async") {
        params.mode = Mode::async;
        params.sync_interval_us = 100'000;
    }

    const Policy policy = accepted_policy(params);
    expect(policy.limit >= 1, "a zone admits something");
    expect(policy.emission_interval_us >= 1 || policy.holds_places(),
           "T >= 1 us (a concurrent= zone has no rate)");
    expect(policy.log_slots >= 0 && policy.log_slots <= kMaxLogMax,
           "a key keeps at most kMaxLogMax words beside it");
    return policy;
}

} // namespace

void
fuzz_one(std::string_view input)
{
    std::string_view requests;
    SetupLine        setup = SetupLine::split(input, requests);
    const Policy     policy = policy_of(setup);

    FuzzedDataProvider   in(reinterpret_cast<const uint8_t *>(requests.data()),
                            requests.size());
    StoredKey            key;
    std::vector<int64_t> log(static_cast<size_t>(policy.log_slots));
    bool                 held = false;
    int64_t              now = send_time(policy);

    while (in.remaining_bytes() > 0) {
        now = std::max<int64_t>(0,
                                now
                                    + in.ConsumeIntegralInRange<int64_t>(
                                        -60'000'000, 2 * 86'400'000'000));
        // a concurrent= zone's line has no cost=: a request takes a place
        const int64_t cost = policy.holds_places()
            ? 1
            : in.ConsumeIntegralInRange<int64_t>(0, kMaxCost);

        const bool fresh = !held || key.expire_at_us <= now;
        Decision   d = policy.decide(held ? &key : nullptr,
                                   held ? log.data() : nullptr, now, cost);
        check_local_decision(d, policy, cost, fresh);
        if (!d.result.limited && d.store) {
            if (!held) {
                held = true; // a new node: zeroed
                key = StoredKey{};
                std::fill(log.begin(), log.end(), 0);
            }
            policy.commit(d, now, cost, key, log.data());
        }
    }
}

} // namespace throttle::fuzz
