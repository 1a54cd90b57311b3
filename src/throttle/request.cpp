// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/request.hpp"

#include <algorithm>

namespace throttle {

namespace {

// How often a request waiting for a flight looks again: the answer of a
// flooded key's flight takes a round trip, less than a millisecond on a
// LAN.
constexpr int64_t kFlightPollUs = 1000;

// How long a result asks to wait: a cost that never fits, longest of all.
int64_t
wait_asked(const ThrottleResult &res) noexcept
{
    return res.retry_after_us < 0 ? INT64_MAX : res.retry_after_us;
}

Status
by_dry_run(const RequestRules &rules, Status real, Status dry) noexcept
{
    return rules.dry_run ? dry : real;
}

} // namespace

bool
binds_before(const ThrottleResult &res, const ThrottleResult &cur) noexcept
{
    if (res.limited != cur.limited) {
        return res.limited;
    }

    return res.limited ? wait_asked(res) > wait_asked(cur)
                       : res.remaining < cur.remaining;
}

bool
answers_before(const Answer &a, const Answer &b) noexcept
{
    int said_a = status_info(a.status).weight;
    int said_b = status_info(b.status).weight;

    if (said_a != said_b) {
        return said_a > said_b;
    }

    return a.result
        && (b.result == nullptr || binds_before(*a.result, *b.result));
}

void
RequestDecision::begin(const RequestRules &rules, ZoneCheck *checks,
                       size_t n) noexcept
{
    bool any = false;

    rules_ = rules;
    checks_ = checks;
    n_ = n;
    strict_ = false;
    asked_redis_ = false;
    redis_failed_ = false;
    admitted_ = false;
    waited_us_ = 0;
    outcome_ = Outcome{};

    for (size_t i = 0; i < n; i++) {
        any = any || checks[i].policy;
        strict_ = strict_ || checks[i].strict();
    }

    if (!any) {
        outcome_.status = Status::passed;
        stage_ = Stage::decided;
        return;
    }

    stage_ = Stage::zones;
}

bool
RequestDecision::takes_part(size_t i) const noexcept
{
    const ZoneCheck &c = checks_[i];

    return c.policy
        && (stage_ == Stage::zones
            || (stage_ == Stage::zones_after_redis && !c.strict()));
}

bool
RequestDecision::any_limited() const noexcept
{
    for (size_t i = 0; i < n_; i++) {
        if (takes_part(i) && checks_[i].decision.result.limited) {
            return true;
        }
    }
    return false;
}

bool
RequestDecision::charges() const noexcept
{
    bool any = false;

    for (size_t i = 0; i < n_ && !any; i++) {
        any = takes_part(i);
    }

    return any && (stage_ == Stage::zones_after_redis || !strict_)
        && !any_limited();
}

void
RequestDecision::end_pass(bool room) noexcept
{
    bool rejected = any_limited();

    if (charges()) {
        if (!room) {
            /* the zones are charged all or none: none, and Redis gives
             * back what it charged */
            keep_redis_charges(false);
            fail();
            return;
        }

        for (size_t i = 0; i < n_; i++) {
            checks_[i].charged = checks_[i].charged || takes_part(i);
        }
    }

    if (stage_ == Stage::zones) {
        if (rejected || !strict_) {
            finish(rejected);
        } else if (waits_for_flight()) {
            stage_ = Stage::flight;
        } else if (waited_for_failed_flight()) {
            /* its flight's failure is its answer: it does not wait a
             * Redis timeout more for a script of its own */
            for (size_t i = 0; i < n_; i++) {
                checks_[i].failed = checks_[i].strict();
            }
            redis_done();
        } else {
            asked_redis_ = true;
            stage_ = Stage::redis;
        }
        return;
    }

    /* after Redis admitted it: the other zones have had their say */
    keep_redis_charges(!rejected);

    if (redis_failed_ && !rejected) {
        fail();
    } else {
        finish(rejected);
    }
}

int64_t
RequestDecision::flight_budget_us() const noexcept
{
    int64_t budget = INT64_MAX;

    for (size_t i = 0; i < n_; i++) {
        if (checks_[i].strict()) {
            budget = std::min(budget, checks_[i].flight_budget_us);
        }
    }
    return budget;
}

// Whether a strict zone's key has a flight to wait for, and the request
// may still wait.
bool
RequestDecision::waits_for_flight() const noexcept
{
    bool flight = false;

    for (size_t i = 0; i < n_; i++) {
        flight =
            flight || (checks_[i].strict() && checks_[i].flight_wait_us > 0);
    }
    return flight && waited_us_ < flight_budget_us();
}

// Whether the request waited for a flight that has failed since: no
// answer came in time (or an error did), so none will for it either.
bool
RequestDecision::waited_for_failed_flight() const noexcept
{
    bool failed = false;

    for (size_t i = 0; i < n_; i++) {
        failed = failed || (checks_[i].strict() && checks_[i].flight_failed);
    }
    return failed && waited_us_ > 0;
}

int64_t
RequestDecision::flight_poll_us() const noexcept
{
    return std::clamp<int64_t>(flight_budget_us() - waited_us_, 1,
                               kFlightPollUs);
}

void
RequestDecision::retry(int64_t waited_us) noexcept
{
    if (stage_ == Stage::flight) {
        waited_us_ = std::max(waited_us_, waited_us);
        stage_ = Stage::zones;
    }
}

bool
RequestDecision::denied_from_memory(size_t i) const noexcept
{
    return !asked_redis_ && checks_[i].strict()
        && checks_[i].decision.result.limited;
}

bool
RequestDecision::asks_redis(size_t i) const noexcept
{
    return stage_ == Stage::redis && checks_[i].strict();
}

void
RequestDecision::answered(size_t i, const ThrottleResult &answer) noexcept
{
    checks_[i].decision.result = answer;
}

void
RequestDecision::failed(size_t i) noexcept
{
    checks_[i].failed = true;
}

void
RequestDecision::redis_done() noexcept
{
    bool rejected = false;

    for (size_t i = 0; i < n_; i++) {
        const ZoneCheck &c = checks_[i];

        if (c.strict()) {
            redis_failed_ = redis_failed_ || c.failed;
            rejected = rejected || (!c.failed && c.decision.result.limited);
        }
    }

    /* a failure lets the other zones decide unless it turns the request
     * away anyway */
    bool denied =
        redis_failed_ && on_error_status(rules_) == Status::error_denied;

    if (!rejected && !denied) {
        stage_ = Stage::zones_after_redis;
        return;
    }

    keep_redis_charges(false);

    if (redis_failed_ && !rejected) {
        fail();
    } else {
        finish(rejected);
    }
}

void
RequestDecision::keep_redis_charges(bool admitted) noexcept
{
    admitted_ = admitted;

    for (size_t i = 0; i < n_; i++) {
        ZoneCheck &c = checks_[i];

        if (asked_redis_ && c.strict() && !c.failed) {
            c.charged = admitted;
        }
    }
}

FollowUp
RequestDecision::follow_up(size_t i) const noexcept
{
    const ZoneCheck &c = checks_[i];

    if (stage_ != Stage::decided || !asked_redis_ || !c.strict() || c.failed) {
        return FollowUp::none;
    }

    /* an answer given back has nothing to teach the zone */
    if (c.decision.result.limited || admitted_) {
        return FollowUp::remember;
    }

    return c.cost > 0 ? FollowUp::refund : FollowUp::none;
}

void
RequestDecision::fail() noexcept
{
    outcome_.status = on_error_status(rules_);
    outcome_.binding = -1;
    stage_ = Stage::decided;
}

// Every zone's wait (for its own verdict), and the longest.
void
RequestDecision::waits() noexcept
{
    for (size_t i = 0; i < n_; i++) {
        ZoneCheck &c = checks_[i];

        if (c.policy == nullptr || c.failed) {
            continue;
        }

        c.wait_us =
            c.policy->delay_us(c.decision.result, c.cost, c.delay_units);

        if (c.wait_us > 0
            && (outcome_.longest < 0
                || c.wait_us > checks_[outcome_.longest].wait_us))
        {
            outcome_.longest = static_cast<int>(i);
        }
    }
}

void
RequestDecision::finish(bool rejected) noexcept
{
    for (size_t i = 0; i < n_; i++) {
        const ZoneCheck &c = checks_[i];

        if (c.policy == nullptr || c.failed) {
            continue;
        }

        if (outcome_.binding < 0
            || binds_before(c.decision.result,
                            checks_[outcome_.binding].decision.result))
        {
            outcome_.binding = static_cast<int>(i);
        }
    }

    if (outcome_.binding >= 0) {
        outcome_.result = checks_[outcome_.binding].decision.result;
    }

    waits();
    stage_ = Stage::decided;

    if (rejected) {
        outcome_.longest = -1;
        outcome_.status =
            by_dry_run(rules_, Status::rejected, Status::rejected_dry_run);

    } else if (outcome_.longest < 0) {
        outcome_.status = Status::passed;

    } else {
        outcome_.delay_ms = ceil_millis(checks_[outcome_.longest].wait_us);
        outcome_.status =
            by_dry_run(rules_, Status::delayed, Status::delayed_dry_run);
    }
}

std::optional<int64_t>
RequestDecision::settle_units(size_t i, int64_t settled_units) const noexcept
{
    const ZoneCheck &c = checks_[i];

    if (stage_ != Stage::decided || c.policy == nullptr || settles_nothing()) {
        return std::nullopt;
    }

    if (c.charged) {
        return settled_units - c.cost;
    }

    /* throttle_on_error let it go on uncharged (a Redis that failed, a
     * zone without room): what it used is charged in full */
    if (outcome_.status == Status::error_allowed) {
        return settled_units;
    }

    return std::nullopt;
}

std::optional<int64_t>
RequestDecision::reserved_units(size_t i) const noexcept
{
    if (!settle_units(i, 0) || !checks_[i].charged || checks_[i].cost < 1) {
        return std::nullopt;
    }
    return checks_[i].cost;
}

bool
RequestDecision::settles_nothing() const noexcept
{
    return stage_ == Stage::decided
        && (turns_away(outcome_.status)
            || outcome_.status == Status::rejected_dry_run);
}

Status
RequestDecision::verdict(size_t i) const noexcept
{
    const ZoneCheck &c = checks_[i];

    if (!c.failed && c.decision.result.limited) {
        return by_dry_run(rules_, Status::rejected, Status::rejected_dry_run);
    }

    if (outcome_.status == Status::error_allowed
        || outcome_.status == Status::error_denied)
    {
        return outcome_.status;
    }

    if (c.failed) {
        /* another zone refused the request first */
        return on_error_status(rules_);
    }

    if (c.wait_us > 0) {
        return by_dry_run(rules_, Status::delayed, Status::delayed_dry_run);
    }

    return Status::passed;
}

} // namespace throttle
