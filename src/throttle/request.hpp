// SPDX-License-Identifier: BSD-2-Clause
// The decision about one request over every zone it is checked against (a
// location's "throttle" lines of one phase, or the checks of one
// throttle_api call): all must pass, and a request one zone refuses is
// charged to none. The rules live here; the caller (the nginx glue) does
// what needs nginx: it looks each zone up under its lock, charges the
// zones, asks Redis, and reports back.
//
// A decision goes through stages:
//
//   zones              every zone decides from what it holds (a strict zone
//                      from its memory of Redis's rejections); the local and
//                      async ones are charged if no strict zone asks Redis
//   flight             a strict zone's key has a script of another request
//                      in flight (Policy::flight_wait_us()): the request
//                      waits for its answer, then the zones decide again
//   redis              the strict zones' answers are awaited
//   zones_after_redis  Redis admitted the request: the other zones decide
//                      again, and are charged if they agree
//   decided            the outcome is known
//
// In the two zone stages the caller locks the zones of the checks that
// take_part(), stores each one's Decision, charges them if charges() says
// so (all or none), and calls end_pass().
#pragma once

#include "throttle/decision.hpp"
#include "throttle/policy.hpp"
#include "throttle/result.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace throttle {

// What a phase, or one zone, said of a request ($throttle_status, the
// API's "status", nginx_throttle_requests_total's result).
enum class Status : uint8_t {
    none,
    passed,
    rejected,
    rejected_dry_run,
    error_allowed,
    error_denied,
    delayed,         // passed after a wait (delay=)
    delayed_dry_run, // would have waited
};

constexpr size_t kStatusCount = 8;

struct StatusInfo {
    Status           status;
    std::string_view name;  // $throttle_status and the API's "status"
    std::string_view label; // the metric's result="..."
    // How much it says, for the answer a client gets when two phases
    // decided: a phase that failed says more than one that only held the
    // request back.
    int weight;
};

inline constexpr StatusInfo kStatuses[kStatusCount] = {
    {Status::none, "", "", 0},
    {Status::passed, "PASSED", "passed", 1},
    {Status::rejected, "REJECTED", "rejected", 7},
    {Status::rejected_dry_run, "REJECTED_DRY_RUN", "rejected_dry_run", 5},
    {Status::error_allowed, "ERROR_ALLOWED", "error_allowed", 4},
    {Status::error_denied, "ERROR_DENIED", "error_denied", 6},
    {Status::delayed, "DELAYED", "delayed", 3},
    {Status::delayed_dry_run, "DELAYED_DRY_RUN", "delayed_dry_run", 2},
};

constexpr bool
statuses_in_order() noexcept
{
    for (size_t i = 0; i < kStatusCount; i++) {
        if (static_cast<size_t>(kStatuses[i].status) != i) {
            return false;
        }
    }
    return true;
}

static_assert(statuses_in_order(), "kStatuses is indexed by Status");
static_assert(static_cast<size_t>(Status::delayed_dry_run) + 1 == kStatusCount,
              "every Status has a row in kStatuses");

constexpr const StatusInfo &
status_info(Status status) noexcept
{
    return kStatuses[static_cast<size_t>(status)];
}

// Whether a status turns the request away (with the location's
// throttle_status).
constexpr bool
turns_away(Status status) noexcept
{
    return status == Status::rejected || status == Status::error_denied;
}

// How the location that decides takes the outcome.
struct RequestRules {
    bool dry_run = false;       // never turns a request away
    bool deny_on_error = false; // throttle_on_error deny
};

// What a request gets when a zone cannot decide it: dry run never turns a
// request away, not even on "throttle_on_error deny".
constexpr Status
on_error_status(const RequestRules &rules) noexcept
{
    return rules.deny_on_error && !rules.dry_run ? Status::error_denied
                                                 : Status::error_allowed;
}

// One zone's check of a request.
struct ZoneCheck {
    // given
    const Policy *policy = nullptr; // null: an empty key, not limited
    int64_t       cost = 0;
    int64_t       delay_units = kNoDelay; // the line's delay=

    // as the decision goes
    Decision decision{};  // the zone's, or Redis's answer
    int64_t  wait_us = 0; // how long this zone holds the request back
    // strict: how long the request may wait for its key's flight (from
    // Policy::flight_wait_us(), each zone pass; 0: it need not), and in
    // all for flights (its Redis's timeout)
    int64_t flight_wait_us = 0;
    int64_t flight_budget_us = 0;
    // strict: the key's last flight failed (Policy::flight_failed()), as
    // the glue found it each zone pass
    bool flight_failed = false;
    bool failed = false;  // its Redis did not answer
    bool charged = false; // the zone keeps the cost

    bool strict() const noexcept
    {
        return policy && policy->mode == Mode::strict;
    }
};

// What the caller does with a strict check's answer once decided.
enum class FollowUp : uint8_t {
    none,
    remember, // the zone learns from Redis's answer
    refund,   // Redis gives back a charge the request does not use
};

// The outcome, once decided.
struct Outcome {
    Status status = Status::none;
    // the check whose answer the client gets; -1 if none decided
    int            binding = -1;
    ThrottleResult result{}; // the binding check's answer
    // the check that holds a passed request longest; -1 if none does
    int     longest = -1;
    int64_t delay_ms = 0; // its wait, rounded up to whole ms
};

// Whether a client should rather get answer `res` than `cur`: a rejection
// over a pass, among rejections the one that asks to wait longest, among
// passes the one with the fewest units remaining.
bool binds_before(const ThrottleResult &res,
                  const ThrottleResult &cur) noexcept;

// A phase's (or an API call's) answer, to choose among them.
struct Answer {
    Status                status = Status::none;
    const ThrottleResult *result = nullptr; // null: no binding zone
};

// Whether `a` is the answer the client gets rather than `b`: the one that
// says more (StatusInfo::weight), and between equals the one whose binding
// zone binds before.
bool answers_before(const Answer &a, const Answer &b) noexcept;

class RequestDecision {
  public:
    enum class Stage : uint8_t {
        idle,
        zones,
        flight,
        redis,
        zones_after_redis,
        decided
    };

    // The checks are the caller's, and outlive the decision.
    void begin(const RequestRules &rules, ZoneCheck *checks, size_t n) noexcept;

    Stage            stage() const noexcept { return stage_; }
    ZoneCheck       &check(size_t i) noexcept { return checks_[i]; }
    const ZoneCheck &check(size_t i) const noexcept { return checks_[i]; }

    // --- the zone stages

    // Whether check i's zone decides in this stage.
    bool takes_part(size_t i) const noexcept;
    // With every decision of the stage stored: whether the zones that took
    // part are charged (all of them, or none if one has no room).
    bool charges() const noexcept;
    // The zones that took part were charged (or one had no room).
    void end_pass(bool charged) noexcept;
    // Check i is a strict zone that turned the request away from its
    // memory of Redis's rejections.
    bool denied_from_memory(size_t i) const noexcept;

    // --- the flight stage

    // How long the caller waits before the zones decide again: a short
    // look, never past what the request may still wait.
    int64_t flight_poll_us() const noexcept;
    // The request has waited `waited_us` in all: the zones decide again.
    // A request that has waited as long as its Redis's timeout (the
    // smallest, over its strict zones) waits no more: it asks Redis.
    void retry(int64_t waited_us) noexcept;

    // --- the redis stage

    // Whether Redis decides check i (its call is sent).
    bool asks_redis(size_t i) const noexcept;
    void answered(size_t i, const ThrottleResult &answer) noexcept;
    void failed(size_t i) noexcept;
    // Every call has been answered, or has failed.
    void redis_done() noexcept;
    // Once decided, for a check Redis was asked about.
    FollowUp follow_up(size_t i) const noexcept;

    // A check could not be made (a variable's value the zone cannot
    // take): the request is decided by throttle_on_error.
    void cannot_decide() noexcept { fail(); }

    // --- decided

    const Outcome &outcome() const noexcept { return outcome_; }
    // settle=: how many more units check i's key is charged when the
    // request ends with `settled_units` (negative: given back), or none.
    // A zone that kept the cost is charged the difference; a zone that
    // kept nothing because throttle_on_error let the request go on (its
    // Redis failed, or a zone had no room) is charged all of it. A request
    // turned away, refused by a zone (in a dry run too), or checked with an
    // empty key settles nothing.
    std::optional<int64_t> settle_units(size_t  i,
                                        int64_t settled_units) const noexcept;
    // throttle_api: the units check i's key keeps as a reservation that a
    // settle call may adjust (its cost, if it was charged and is at least
    // 1, in a request that settles: as settle_units() has it), or none.
    std::optional<int64_t> reserved_units(size_t i) const noexcept;
    // Decided, and the request was turned away or refused by a zone (in a
    // dry run too): it settles nothing, in this decision's zones nor in
    // those of the other phase, which may have admitted it before.
    bool settles_nothing() const noexcept;
    // What check i's zone itself said: rejected if it refused the request,
    // whatever the others said; else the on_error status if the decision
    // fell to it or this zone's Redis failed; else delayed if its own line
    // held the request back, passed if not (even if another zone refused).
    Status verdict(size_t i) const noexcept;

  private:
    bool    any_limited() const noexcept;
    bool    waits_for_flight() const noexcept;
    bool    waited_for_failed_flight() const noexcept;
    int64_t flight_budget_us() const noexcept;
    void    fail() noexcept;
    void    finish(bool rejected) noexcept;
    void    waits() noexcept;
    void    keep_redis_charges(bool admitted) noexcept;

    RequestRules rules_{};
    ZoneCheck   *checks_ = nullptr;
    size_t       n_ = 0;
    Stage        stage_ = Stage::idle;
    bool         strict_ = false; // a strict zone takes part
    bool         asked_redis_ = false;
    bool         redis_failed_ = false; // a strict zone's Redis did not answer
    bool         admitted_ = false;     // by every zone, after Redis's answers
    int64_t      waited_us_ = 0;        // for flights, in all
    Outcome      outcome_{};
};

// The glue keeps decisions in memory that nginx zero-fills and never
// destroys.
static_assert(std::is_trivially_destructible_v<RequestDecision>);
static_assert(std::is_trivially_destructible_v<ZoneCheck>);

} // namespace throttle
