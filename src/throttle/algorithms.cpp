// SPDX-License-Identifier: BSD-2-Clause
// The registry of algorithms, and what Algorithm does for those that keep
// the defaults.
#include "throttle/algorithm.hpp"

#include "throttle/denial.hpp"
#include "throttle/policy.hpp"

#include <cstdio>
#include <iterator>

namespace throttle {

// Each is defined in the algorithm's own file.
const Algorithm &gcra_algorithm() noexcept;
const Algorithm &fixed_window_algorithm() noexcept;
const Algorithm &sliding_window_algorithm() noexcept;
const Algorithm &sliding_log_algorithm() noexcept;

namespace {

// Every algorithm, in the order messages list them: a new one is declared
// above and listed here.
constexpr const Algorithm &(*kAlgorithms[])() noexcept = {
    gcra_algorithm,
    fixed_window_algorithm,
    sliding_window_algorithm,
    sliding_log_algorithm,
};

// Appends the algorithms that `pick` selects to `out` as `"<before>name"`
// joined by `sep` and `last`.
template <typename Pick>
size_t
list_names(char *out, size_t size, const char *before, const char *sep,
           const char *last, Pick pick) noexcept
{
    const Algorithm *picked[std::size(kAlgorithms)];
    size_t           n = 0;
    for (auto algorithm : kAlgorithms) {
        if (pick(algorithm())) {
            picked[n++] = &algorithm();
        }
    }

    size_t len = 0;
    for (size_t i = 0; i < n && len < size; i++) {
        const char *joint = i == 0 ? "" : i + 1 == n ? last : sep;
        len += static_cast<size_t>(std::snprintf(
            out + len, size - len, "%s\"%s%.*s\"", joint, before,
            static_cast<int>(picked[i]->name.size()), picked[i]->name.data()));
    }
    return len;
}

// The algorithms that `pick` selects, as `"algorithm=a" or "algorithm=b"`,
// into `out`.
template <typename Pick>
const char *
algorithm_options(Message &out, Pick pick) noexcept
{
    char names[160];
    list_names(names, sizeof(names), "algorithm=", " or ", " or ", pick);
    return out.format("%s", names).text();
}

} // namespace

Parsed<const Algorithm *>
find_algorithm(std::string_view name, Message &why) noexcept
{
    for (auto algorithm : kAlgorithms) {
        if (algorithm().name == name) {
            return {&algorithm(), nullptr};
        }
    }

    char names[160];
    list_names(names, sizeof(names), "", ", ", " or ",
               [](const Algorithm &) { return true; });
    return {std::nullopt, why.format("is unknown (use %s)", names).text()};
}

const Algorithm &
default_algorithm() noexcept
{
    return kAlgorithms[0]();
}

const char *
log_max_algorithms(Message &out) noexcept
{
    return algorithm_options(
        out, [](const Algorithm &a) { return a.takes_log_max; });
}

const char *
delay_algorithms(Message &out) noexcept
{
    return algorithm_options(out,
                             [](const Algorithm &a) { return a.can_delay; });
}

void
Algorithm::record(const Policy &, const Decision &decision, int64_t, int64_t,
                  KeyState &state, int64_t &expire_at_us,
                  int64_t *) const noexcept
{
    state = decision.state;
    expire_at_us = decision.expire_at_us;
}

Decision
Algorithm::remember(const Policy &policy, const KeyState *memory,
                    const ThrottleResult &answer, int64_t cost,
                    int64_t sent_at_us) const noexcept
{
    return remember_denial(memory, answer, cost, sent_at_us,
                           units_leave_gradually(),
                           {policy.limit, policy.window_us});
}

Decision
Algorithm::recall(const Policy &policy, const KeyState *memory,
                  int64_t expire_at_us, int64_t now_us,
                  int64_t cost) const noexcept
{
    return recall_denial(memory, expire_at_us, {policy.limit, policy.window_us},
                         now_us, cost);
}

} // namespace throttle
