// SPDX-License-Identifier: BSD-2-Clause
// The interface every algorithm implements, and the registry of them.
//
// An algorithm is a class deriving from Algorithm, defined with its maths
// in a file of its own (gcra.cpp, fixed_window.cpp, ...), with its Lua
// twins in src/scripts/, and listed in algorithms.cpp. Nothing else names
// it: the rest of the module (the nginx glue included) reaches it through
// a zone's Policy (policy.hpp).
#pragma once

#include "throttle/decision.hpp"
#include "throttle/parse.hpp"
#include "throttle/result.hpp"
#include "throttle/scripts.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace throttle {

struct Policy;

// A script's ARGV after its one key, as integers: at most 4.
struct ScriptArgs {
    int64_t values[4] = {0, 0, 0, 0};
    size_t  n = 0;
};

// A strict zone's scripts: the one that decides, the one that gives back
// a charge (for a request another zone rejected, or the part settle=
// finds unused), how many integers the first returns after the result to
// identify the charge, and the one that charges what settle= finds used
// beyond the reservation.
struct StrictScripts {
    const Script *decide;
    const Script *refund;
    size_t        tokens;
    const Script *charge;
};

// The shape of a sync script's call for a batch of keys: its KEYS are the
// keys; its ARGV is head_args integers, then key_args per key; its reply is
// reply_head integers, then reply_per_key per key.
struct SyncLayout {
    const Script *script;
    size_t        head_args;
    size_t        key_args;
    size_t        reply_head;
    size_t        reply_per_key;
};

// How an algorithm keeps nodes in step in async mode: what a node sends of
// the units it admitted, and how Redis's answer becomes its view.
//
// In a zone whose rate= is a variable (Policy::rate_varies) each key syncs
// at its own rate, its latest request's: its ARGV carries it too (one
// more integer a key), and the head says so; the policy given for a key
// is then the key's (synced_plan(), plans.hpp), the one given for the
// head and the layout the zone's.
class Syncing {
  public:
    virtual SyncLayout layout(const Policy &policy) const noexcept = 0;
    // ARGV ahead of the keys' (layout().head_args integers).
    virtual void head_args(const Policy &policy,
                           int64_t      *out) const noexcept = 0;
    // A key's ARGV (layout().key_args integers): its units unsent when the
    // batch left at sent_at_us.
    virtual void key_args(const Policy &policy, const PendingUnits &units,
                          int64_t sent_at_us, int64_t *out) const noexcept = 0;
    // Redis's answer for a key (`reply_head`: the reply's head; `values`:
    // the key's part) becomes the key's state and expiry, with the units the
    // node charged since (key.pending). False if the answer says nothing new
    // (the key is fresh in Redis) or is about a time the node has left
    // behind: the key stays as it is.
    virtual bool apply(const Policy &policy, const int64_t *reply_head,
                       const int64_t *values, int64_t sent_at_us,
                       int64_t now_us, StoredKey &key) const noexcept = 0;
    // Adds a request of `cost` admitted at now_us; `after` is the key's
    // state once it passed.
    virtual PendingUnits charge(const Policy &policy, PendingUnits pending,
                                int64_t cost, int64_t now_us,
                                const KeyState &after) const noexcept = 0;
    // A settle (Algorithm::settle()) at now_us turned the key's state from
    // `before` (a fresh key's if it was stale) into `after`: adds what it
    // changed, which may be negative (units given back), for the sync to
    // take to Redis. Redis applies it as the settle did here: a charge
    // whatever the key holds, a refund never below a fresh key.
    virtual PendingUnits settle(const Policy &policy, PendingUnits pending,
                                const KeyState &before, const KeyState &after,
                                int64_t now_us) const noexcept = 0;
    // Units a failed sync took back, put together with those charged since.
    virtual PendingUnits merge(const Policy &policy, PendingUnits kept,
                               PendingUnits since_taken) const noexcept = 0;
    // How many units `pending` stands for, given back ones included: what
    // a sync has left to send.
    virtual int64_t total(const PendingUnits &pending) const noexcept = 0;

  protected:
    ~Syncing() = default;
};

class Algorithm {
  public:
    // Its name in algorithm=.
    std::string_view name;
    // Whether its windows follow the wall clock (UTC, as Redis's TIME
    // does) rather than a clock that never goes back.
    bool wall_clock;
    // Whether it takes log_max=.
    bool takes_log_max;
    // Whether a throttle line's delay= may hold the requests it admits
    // back, to space them out: its answers must say when an admitted
    // request would have conformed (delay_us()); else why_no_delay() says
    // why not.
    bool can_delay;

    constexpr Algorithm(std::string_view algorithm_name, bool on_wall_clock,
                        bool log_max, bool delays) noexcept
        : name(algorithm_name), wall_clock(on_wall_clock),
          takes_log_max(log_max), can_delay(delays)
    {
    }

    // --- configuration

    // Derives the policy's limit, window_us and log_slots from its rate,
    // burst, mode and log_max; false, with why, if they are out of range.
    virtual bool configure(Policy &policy, Message &why) const noexcept = 0;

    // --- local zones (and async ones between syncs): the zone decides

    // `current` is null for a key the zone does not hold (or holds stale);
    // `log` is the key's policy.log_slots words (null with a null current).
    virtual Decision decide(const Policy &policy, const KeyState *current,
                            const int64_t *log, int64_t now_us,
                            int64_t cost) const noexcept = 0;
    // Writes a decision that passed into the key; `expire_at_us` is the
    // key's, 0 for a new key. By default the decision carries the state.
    virtual void record(const Policy &policy, const Decision &decision,
                        int64_t now_us, int64_t cost, KeyState &state,
                        int64_t &expire_at_us, int64_t *log) const noexcept;
    // Settles a reservation recorded at reserved_at_us, once its request
    // has ended, by `delta_units` (the units it used less those reserved:
    // neither 0 nor INT64_MIN). The key is live at now_us, or comes zeroed
    // as a fresh key's (Policy::settle() sees to it). A charge (delta > 0)
    // is made at now_us even if it overdraws the key: the request was
    // served, and the requests after it are rejected until the debt has
    // drained. A refund (delta < 0) gives back at most -delta units of
    // that reservation, of those that still count (not those of a window
    // that has ended, nor log entries that have left the window; GCRA's
    // funnel drains as one, see gcra_settle()), and never leaves the key
    // emptier than a fresh key. Nothing overflows: what cannot be held
    // saturates (see each algorithm). `expire_at_us` becomes when the
    // state is a fresh key's again: now_us if it already is.
    virtual void settle(const Policy &policy, int64_t delta_units,
                        int64_t reserved_at_us, int64_t now_us, KeyState &state,
                        int64_t &expire_at_us, int64_t *log) const noexcept = 0;

    // --- strict zones: Redis decides; the zone remembers its answers

    virtual StrictScripts strict_scripts() const noexcept = 0;
    // The decision script's ARGV.
    virtual ScriptArgs decision_args(const Policy &policy,
                                     int64_t       cost) const noexcept = 0;
    // The refund script's ARGV for a charge of `cost` that the decision
    // identified by `tokens`.
    virtual ScriptArgs refund_args(const Policy &policy, int64_t cost,
                                   const int64_t tokens[2]) const noexcept = 0;
    // The charge script's ARGV for `units` (> 0) more, charged at Redis's
    // now as settle() charges them, never rejected. A settle in Redis is
    // a refund or a charge, not one script of a signed delta: a refund
    // needs the decision's tokens and is the refund script's very rule
    // (any part of a charge; see the scripts), a charge needs no tokens
    // and is made wherever now falls.
    virtual ScriptArgs charge_args(const Policy &policy,
                                   int64_t       units) const noexcept = 0;
    // What to make of Redis's answer to `cost` units sent at sent_at_us
    // (the zone's clock, never later than when Redis decided), given what
    // is remembered (`memory`: null if nothing live): a decision to commit
    // (one already stale forgets), whose store is false to keep the memory
    // as it is. Every answer but a charge given back comes here. By default
    // Redis's rejection of that very cost (see denial.hpp).
    virtual Decision remember(const Policy &policy, const KeyState *memory,
                              const ThrottleResult &answer, int64_t cost,
                              int64_t sent_at_us) const noexcept;
    // Rejects from what remember() kept (`memory`: null if nothing, or
    // nothing live) what Redis would reject, with Redis's answer; a
    // decision that is not limited means "ask Redis". Never stores.
    virtual Decision recall(const Policy &policy, const KeyState *memory,
                            int64_t expire_at_us, int64_t now_us,
                            int64_t cost) const noexcept;
    // Whether what remember() keeps reads as the key's state too (and the
    // state as a memory), so that a zone may move to or from sync=strict
    // over a reload and keep its keys.
    virtual bool memory_is_state() const noexcept { return false; }
    // Whether a key's expiry is always its first state word, in local and
    // strict zones alike (GCRA's TAT): a zone's table then keeps only that
    // word of them (Policy::slot_words()).
    virtual bool expiry_is_state() const noexcept { return false; }
    // Whether units leave a key's window one by one as time passes (a
    // sliding window or log): then a rejected key's remaining units may
    // grow before its retry time, which the default memory must allow for.
    virtual bool units_leave_gradually() const noexcept { return false; }

    // --- delay= (algorithms that can_delay), in every mode

    // How long a request it admitted (`admitted`: the zone's answer, or
    // Redis's, for `cost` units) waits before it goes on, so that at most
    // `delay` units are ahead of it when it does; never negative.
    virtual int64_t delay_us(const Policy &, const ThrottleResult &, int64_t,
                             int64_t) const noexcept
    {
        return 0;
    }
    virtual const char *why_no_delay() const noexcept { return nullptr; }

    // --- async zones: the zone decides, and syncs with Redis

    // How it syncs, or null if it cannot (then why_not_async() says why,
    // and what to use instead).
    virtual const Syncing *syncing() const noexcept = 0;
    virtual const char    *why_not_async() const noexcept { return nullptr; }

  protected:
    ~Algorithm() = default;
};

// The algorithm named `name`, or an error that lists the known ones.
Parsed<const Algorithm *> find_algorithm(std::string_view name,
                                         Message         &why) noexcept;

// The default algorithm: GCRA.
const Algorithm &default_algorithm() noexcept;

// The names of the algorithms that take log_max=, as `"algorithm=a" or
// "algorithm=b"`, for a message.
const char *log_max_algorithms(Message &out) noexcept;

// The names of the algorithms that can delay, the same way.
const char *delay_algorithms(Message &out) noexcept;

} // namespace throttle
