// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/sliding_log.hpp"

#include "throttle/lua.hpp"
#include "throttle/windows.hpp"
#include "throttle/policy.hpp"

#include <algorithm>

namespace throttle {

namespace {

// A view of a key's ring. The state comes from shared memory that a reload
// with another limit may have left behind: head and size are brought into
// the ring's bounds so that no index ever leaves it.
struct Ring {
    const int64_t *slots;
    int64_t        capacity;
    int64_t        head;
    int64_t        size;

    Ring(const WindowParams &params, const KeyState &state,
         const int64_t *s) noexcept
        : slots(s), capacity(params.ring_slots), head(0), size(0)
    {
        if (slots != nullptr && capacity > 0) {
            head = state.words[0] % capacity;
            if (head < 0) {
                head += capacity;
            }
            size = std::clamp<int64_t>(state.words[1], 0, capacity);
        }
    }

    int64_t index(int64_t i) const noexcept { return (head + i) % capacity; }
    int64_t at(int64_t i) const noexcept { return slots[index(i)]; }

    // Entries are in time order: those `before` holds for are a prefix,
    // of which this is the length. Bisected, as a key may hold up to
    // kMaxLogMax of them.
    template <typename Before> int64_t count_while(Before before) const noexcept
    {
        int64_t lo = 0;
        int64_t hi = size;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (before(at(mid))) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    // The live entries are a suffix: where it starts.
    int64_t first_live(int64_t now_us, int64_t window_us) const noexcept
    {
        return count_while(
            [&](int64_t ts) { return ts <= now_us - window_us; });
    }
};

} // namespace

Decision
sliding_log_decide(const WindowParams &params, const KeyState &state,
                   const int64_t *slots, int64_t now_us, int64_t cost) noexcept
{
    const int64_t w = params.window_us;
    const int64_t limit = params.limit;
    const Ring    ring(params, state, slots);
    const int64_t first = ring.first_live(now_us, w);
    const int64_t count = ring.size - first;

    Decision d;
    d.result.limit = limit;

    // The newest entry after this request; none is -1.
    int64_t newest = count > 0 ? ring.at(ring.size - 1) : -1;
    // (a key may hold more entries than the limit: those of a larger
    // limit, before its plan changed)
    if (cost > limit) {
        d.result.limited = true;
        d.result.remaining = std::max<int64_t>(limit - count, 0);
    } else if (count + cost <= limit) {
        d.result.remaining = limit - count - cost;
        if (cost > 0) {
            // where sliding_log_record() puts them
            newest = std::max(newest, now_us);
        }
    } else {
        d.result.limited = true;
        d.result.remaining = std::max<int64_t>(limit - count, 0);
        // The request fits once the k-th oldest entry has left, k = count +
        // cost - limit (1 <= k <= count here).
        const int64_t k = count + cost - limit;
        d.result.retry_after_us = ring.at(first + k - 1) + w - now_us;
    }

    if (newest >= 0) {
        d.result.reset_after_us = newest + w - now_us;
        d.expire_at_us = newest + w;
    }
    return d;
}

int64_t
sliding_log_record(const WindowParams &params, KeyState &state, int64_t *slots,
                   int64_t now_us, int64_t cost) noexcept
{
    const int64_t w = params.window_us;
    const int64_t capacity = params.ring_slots;
    if (slots == nullptr || capacity <= 0) {
        return 0;
    }

    Ring          ring(params, state, slots);
    const int64_t first = ring.first_live(now_us, w);
    int64_t       head = ring.index(first);
    int64_t       size = ring.size - first;

    // A clock that went back must not put an entry before a newer one: the
    // ring is read as sorted.
    const int64_t ts =
        size > 0 ? std::max(now_us, ring.at(ring.size - 1)) : now_us;
    // The caller records only what decide() admitted, so the ring has room;
    // if not, the oldest entries give way rather than memory being
    // overwritten elsewhere. More than the limit (a settle's debt) would
    // only reject for a window longer, as the charge script has it, and
    // more than capacity equal entries would overwrite one another.
    for (int64_t j = std::min({cost, params.limit, capacity}); j > 0; j--) {
        if (size == capacity) {
            head = (head + 1) % capacity;
            size--;
        }
        slots[(head + size) % capacity] = ts;
        size++;
    }

    state.words[0] = head;
    state.words[1] = size;
    return size > 0 ? slots[(head + size - 1) % capacity] + w : 0;
}

void
sliding_log_refund(const WindowParams &params, KeyState &state, int64_t *slots,
                   int64_t stamp_us, int64_t now_us, int64_t units,
                   int64_t &expire_at_us) noexcept
{
    const Ring    ring(params, state, slots);
    const int64_t first = ring.first_live(now_us, params.window_us);
    // the live entries stamped stamp_us: a run, the ring being sorted
    const int64_t from = std::max(
        first, ring.count_while([&](int64_t ts) { return ts < stamp_us; }));
    const int64_t to =
        ring.count_while([&](int64_t ts) { return ts <= stamp_us; });
    const int64_t removed = std::min(units, std::max<int64_t>(to - from, 0));
    if (removed == 0) {
        return;
    }

    // The newer entries move down over the removed ones (a refund is most
    // often of a recent request: fewer to move); those that left the
    // window are dropped.
    for (int64_t i = from + removed; i < ring.size; i++) {
        slots[ring.index(i - removed)] = ring.at(i);
    }
    const int64_t size = ring.size - removed - first;
    state.words[0] = ring.index(first);
    state.words[1] = size;
    expire_at_us =
        size > 0 ? ring.at(first + size - 1) + params.window_us : now_us;
}

namespace {

class SlidingLog final : public WindowAlgorithm {
  public:
    // Its limit is capped by log_max; the decision names its entries' time
    // and first sequence number, for the refund. Its entries of the window
    // before weigh on the current one, as a sliding_window's counter does
    // (but it settles its own way, below).
    constexpr SlidingLog() noexcept
        : WindowAlgorithm("sliding_log", true, INT64_MAX,
                          {&lua::sliding_log, &lua::sliding_log_refund, 2,
                           &lua::sliding_log_charge},
                          nullptr, PreviousWindow::weighs)
    {
    }

    // A local zone keeps the ring in a key's slot.
    bool configure(Policy &policy, Message &why) const noexcept override
    {
        if (!WindowAlgorithm::configure(policy, why)) {
            return false;
        }
        if (policy.limit > policy.log_max) {
            why.format("rate=%s burst=%lld keeps %lld timestamps per key, "
                       "more than log_max=%lld; raise log_max= (up to %lld: "
                       "8 bytes a timestamp per key) or use "
                       "algorithm=sliding_window",
                       RateText(policy.rate).text,
                       static_cast<long long>(policy.burst),
                       static_cast<long long>(policy.limit),
                       static_cast<long long>(policy.log_max),
                       static_cast<long long>(kMaxLogMax));
            return false;
        }
        // a zone's memory is sized once, for every request: where the
        // limit varies per request, for the largest one it may have
        policy.log_slots = policy.mode == Mode::strict ? 0
            : policy.varies()                          ? policy.log_max
                                                       : policy.limit;
        return true;
    }

    // A request that passed is recorded by record(), once every zone of
    // the location passed it.
    Decision decide(const Policy &policy, const KeyState *current,
                    const int64_t *log, int64_t now_us,
                    int64_t cost) const noexcept override
    {
        const bool     held = current != nullptr && log != nullptr;
        const KeyState fresh{};
        Decision       d =
            sliding_log_decide(window_params(policy), held ? *current : fresh,
                               held ? log : nullptr, now_us, cost);
        d.store = !d.result.limited && cost > 0;
        return d;
    }

    void record(const Policy &policy, const Decision &, int64_t now_us,
                int64_t cost, KeyState &state, int64_t &expire_at_us,
                int64_t *log) const noexcept override
    {
        if (expire_at_us <= now_us) {
            state = KeyState{}; // every entry has left
        }
        expire_at_us =
            sliding_log_record(window_params(policy), state, log, now_us, cost);
    }

    // The ring holds `limit` entries: a debt is at most a ring full of
    // entries at now_us (the oldest give way), which rejects every request
    // for a window.
    void settle(const Policy &policy, int64_t delta_units,
                int64_t reserved_at_us, int64_t now_us, KeyState &state,
                int64_t &expire_at_us, int64_t *log) const noexcept override
    {
        const WindowParams params = window_params(policy);
        if (delta_units > 0) {
            expire_at_us =
                sliding_log_record(params, state, log, now_us, delta_units);
        } else {
            sliding_log_refund(params, state, log, reserved_at_us, now_us,
                               -delta_units, expire_at_us);
        }
    }

    ScriptArgs refund_args(const Policy &policy, int64_t cost,
                           const int64_t tokens[2]) const noexcept override
    {
        // a request has at most `limit` entries: a larger refund (of
        // settle=) would only make the script loop longer
        return {{tokens[0], tokens[1], std::min(cost, policy.limit), 0}, 3};
    }

    // The window, the units, and the most entries the log keeps.
    ScriptArgs charge_args(const Policy &policy,
                           int64_t       units) const noexcept override
    {
        return {{policy.window_us, units, policy.limit, 0}, 3};
    }

    const char *why_not_async() const noexcept override
    {
        return "use sync=strict, or sliding_window";
    }

    // each entry leaves the window W after it came
    bool units_leave_gradually() const noexcept override { return true; }
};

const SlidingLog kSlidingLog;

} // namespace

const Algorithm &
sliding_log_algorithm() noexcept
{
    return kSlidingLog;
}

} // namespace throttle
