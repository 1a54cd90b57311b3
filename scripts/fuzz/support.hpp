// SPDX-License-Identifier: BSD-2-Clause
// What the fuzz targets share.
//
// An input that plays a zone starts with a setup line in the words of
// throttle_zone, read by the core's own parsers ("gcra 30r/m 15 ...": the
// algorithm, the rate, the burst, then numbers of the target's own); the
// rest of the input is what Redis sends. A setup line that does not parse
// plays the README's zone, so that a mutation of it still exercises the
// replies. An input that does not start with a letter is all Redis bytes.
//
// A promise the code makes that an input breaks is reported and aborts:
// libFuzzer keeps the input as a crash, as it does for ASan and UBSan.
#pragma once

#include "throttle/headers.hpp"
#include "throttle/policy.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace throttle::fuzz {

[[noreturn]] inline void
broken(const char *promise)
{
    std::fprintf(stderr, "broken promise: %s\n", promise);
    std::abort();
}

inline void
expect(bool kept, const char *promise)
{
    if (!kept) {
        broken(promise);
    }
}

// The setup line's words, one at a time; past the last, empty ones.
class SetupLine {
  public:
    explicit SetupLine(std::string_view line) : rest_(line) {}

    // The input split into its setup line (maybe empty) and Redis's bytes.
    static SetupLine split(std::string_view input, std::string_view &redis)
    {
        const size_t eol = input.find('\n');
        const bool   letter = !input.empty()
            && ((input[0] >= 'a' && input[0] <= 'z')
                || (input[0] >= 'A' && input[0] <= 'Z'));
        if (!letter || eol == std::string_view::npos) {
            redis = input;
            return SetupLine({});
        }
        redis = input.substr(eol + 1);
        return SetupLine(input.substr(0, eol));
    }

    std::string_view word()
    {
        const size_t start =
            std::min(rest_.find_first_not_of(' '), rest_.size());
        rest_.remove_prefix(start);
        const size_t     end = std::min(rest_.find(' '), rest_.size());
        std::string_view w = rest_.substr(0, end);
        rest_.remove_prefix(end);
        return w;
    }

    // A count in [0, max] as burst= reads it, or `otherwise`.
    int64_t count(int64_t max, int64_t otherwise)
    {
        auto parsed = parse_count(word(), max);
        return parsed ? *parsed.value : otherwise;
    }

  private:
    std::string_view rest_;
};

// The README's zone: gcra, 30r/m, burst 15 (and the default
// sync_interval=, 100ms, if async).
inline ZoneParams
readme_zone(Mode mode)
{
    ZoneParams params;
    params.rate = Rate{30, 60'000'000};
    params.burst = 15;
    params.mode = mode;
    params.sync_interval_us = mode == Mode::async ? 100'000 : 0;
    return params;
}

// "concurrent <places> <lease ms>": a concurrent= zone; a word that does
// not parse is the default.
inline ZoneParams
concurrent_zone(SetupLine &setup, Mode mode)
{
    ZoneParams params;
    params.mode = mode;
    params.concurrent = setup.count(kMaxPlaces, 3);
    params.lease_us = setup.count(86'400'000, kDefaultLeaseUs / 1000) * 1000;
    return params;
}

// "<algorithm> <rate> <burst>" or a concurrent_zone(); a word that does
// not parse is the README zone's.
inline ZoneParams
zone_params(SetupLine &setup, Mode mode)
{
    const std::string_view first = setup.word();
    if (first == "concurrent") {
        return concurrent_zone(setup, mode);
    }

    ZoneParams params = readme_zone(mode);
    Message    why;
    auto       algorithm = find_algorithm(first, why);
    auto       rate = parse_rate(setup.word());
    params.algorithm = algorithm ? *algorithm.value : params.algorithm;
    params.rate = rate ? *rate.value : params.rate;
    params.burst = setup.count(kMaxBurst, params.burst.value_or(0));
    return params;
}

// The policy of parameters nginx -t accepts, or the README zone's.
inline Policy
accepted_policy(const ZoneParams &params)
{
    Message why;
    auto    policy = make_policy(params, why);
    if (!policy) {
        policy = make_policy(readme_zone(params.mode), why);
    }
    expect(policy.value.has_value(), "the README's zone is accepted");
    return *policy.value;
}

// When the zone sends its command: a time of its clock as a running nginx
// sees it (the wall clock in 2025, or three days of uptime).
inline int64_t
send_time(const Policy &policy)
{
    return policy.algorithm->wall_clock ? 1'763'000'000'000'000
                                        : 3 * 86'400'000'000;
}

// Whether a zone's clock can read `t`: from its start to 2^53 us (the
// wall clock in the year 2255), where the scripts' doubles are exact.
inline bool
clock_can_read(int64_t t)
{
    return t >= 0 && t <= (int64_t{1} << 53);
}

// a + b, if a zone's clock can read it.
inline std::optional<int64_t>
later(int64_t a, int64_t b)
{
    int64_t t;
    if (__builtin_add_overflow(a, b, &t) || !clock_can_read(t)) {
        return std::nullopt;
    }
    return t;
}

// Feeds `bytes` to the reader the transport reads with
// (open_reply_reader(): hiredis's), `chunk` bytes at a time as the
// transport feeds it what each recv() brings, and hands each complete
// reply to `take`; stops at a protocol error, where the transport drops
// the connection.
template <typename Take>
void
read_replies(std::string_view bytes, size_t chunk, Take take)
{
    redisReader *reader = open_reply_reader();
    expect(reader != nullptr, "a reader is made");

    for (size_t at = 0; at < bytes.size(); at += chunk) {
        const size_t n = std::min(chunk, bytes.size() - at);
        if (redisReaderFeed(reader, bytes.data() + at, n) != REDIS_OK) {
            break;
        }
        void *reply = nullptr;
        while (redisReaderGetReply(reader, &reply) == REDIS_OK
               && reply != nullptr) {
            take(static_cast<const redisReply *>(reply));
            freeReplyObject(reply);
            reply = nullptr;
        }
        if (reader->err != 0) {
            break;
        }
    }
    redisReaderFree(reader);
}

// What any result promises (result.hpp): no negative count or time, and a
// retry time exactly when it is limited and may ever pass.
inline void
check_result(const ThrottleResult &r)
{
    expect(r.remaining >= 0, "remaining >= 0");
    expect(r.reset_after_us >= 0, "reset_after_us >= 0");
    expect(r.limited ? r.retry_after_us == -1 || r.retry_after_us > 0
                     : r.retry_after_us == -1,
           "retry_after_us > 0 if limited (or -1: never), -1 if passed");
}

// The header values of a result fit the room the glue makes for them.
inline void
check_headers(const ThrottleResult &r, const Policy &policy)
{
    constexpr std::string_view zone = "fuzz";
    char                       buf[max_header_value_len(zone.size())];
    expect(format_ratelimit(buf, zone, policy, r) <= sizeof(buf),
           "RateLimit fits its room");
    expect(format_ratelimit_policy(buf, zone, policy) <= sizeof(buf),
           "RateLimit-Policy fits its room");
}

// A decision of the zone itself: a result of its policy's limit.
inline void
check_decision(const Decision &d, const Policy &policy)
{
    check_result(d.result);
    expect(d.result.limit == policy.limit, "the zone's limit");
    check_headers(d.result, policy);
}

// A decision of a local or async zone, which decides by the algorithm:
// within the limit, never a wait for a cost that can never fit, and a
// fresh key (none, or one gone stale) admits up to the limit at once.
inline void
check_local_decision(const Decision &d, const Policy &policy, int64_t cost,
                     bool fresh)
{
    check_decision(d, policy);
    expect(d.result.remaining <= policy.limit, "remaining <= limit");
    if (cost > policy.limit) {
        expect(d.result.limited && d.result.retry_after_us == -1,
               "a cost beyond the limit never fits");
    } else if (fresh) {
        expect(!d.result.limited, "a fresh key admits up to the limit");
    }
}

// What one input does to the code a target fuzzes: each target's own.
void fuzz_one(std::string_view input);

} // namespace throttle::fuzz

// libFuzzer's entry point (each target is one file that includes this).
extern "C" int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    throttle::fuzz::fuzz_one({reinterpret_cast<const char *>(data), size});
    return 0;
}
