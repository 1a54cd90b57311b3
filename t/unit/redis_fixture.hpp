// SPDX-License-Identifier: BSD-2-Clause
// A real redis-server for the tests that run the Lua scripts, and the
// random policies, costs and clocks their timelines draw from.
//
// The suite starts its own redis-server (from PATH; missing, every test
// fails saying so) on a loopback port picked at run time, and stops it at
// the end. The scripts run with their test-only "now" argument, on a
// virtual clock that never falls behind the real one. Redis expires keys
// on its own clock (PEXPIRE is relative), which is not the virtual one: a
// key the virtual clock still counts could go while the test stands still
// on it. The timelines therefore read a key's expiry, then hold the key
// far out (held_pttl()); a key the scripts meant to be gone stays behind
// as stale state, and a script must read stale state as no state. A key
// with less left than the round trip takes can still go before it is
// held (a busy machine takes milliseconds): gone_on_redis_clock() tells.
#pragma once

#include "policy_support.hpp"
#include "throttle/clock.hpp"
#include "throttle/lua.hpp"
#include "throttle/policy.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace throttle::testing_support {

inline constexpr int64_t kSecond = 1'000'000;
inline constexpr int64_t kWindows[] = {kSecond, 60 * kSecond, 3600 * kSecond,
                                       86400 * kSecond};

inline void
sleep_ms(int ms)
{
    timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
    nanosleep(&ts, nullptr);
}

// --- the server

inline std::string
find_in_path(const std::string &name)
{
    const char *path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "";
    size_t      from = 0;
    while (from <= dirs.size()) {
        size_t      to = dirs.find(':', from);
        std::string dir = dirs.substr(
            from, to == std::string::npos ? std::string::npos : to - from);
        std::string file = (dir.empty() ? "." : dir) + "/" + name;
        if (access(file.c_str(), X_OK) == 0) {
            return file;
        }
        if (to == std::string::npos) {
            break;
        }
        from = to + 1;
    }
    return "";
}

// A port nothing listens on now: the kernel's pick for port 0.
inline int
free_port()
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return -1;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int       port = -1;
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0
        && getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    {
        port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
}

struct ReplyFree {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

struct ContextFree {
    void operator()(redisContext *c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;

inline Reply
command(redisContext *c, const std::vector<std::string> &args)
{
    std::vector<const char *> argv;
    std::vector<size_t>       argvlen;
    for (const std::string &a : args) {
        argv.push_back(a.data());
        argvlen.push_back(a.size());
    }
    return Reply(static_cast<redisReply *>(redisCommandArgv(
        c, static_cast<int>(argv.size()), argv.data(), argvlen.data())));
}

// One redis-server, a child of the test.
class RedisServer {
  public:
    // Empty on success, else why not. `args` go first on its command line:
    // a configuration file (sentinels need one), then options.
    std::string start(const std::vector<std::string> &args = {})
    {
        args_ = args;
        const std::string exe = find_in_path("redis-server");
        if (exe.empty()) {
            return "redis-server is not in PATH: these tests need a real "
                   "Redis (7.0 or later) to run the Lua scripts";
        }
        std::string why;
        for (int attempt = 0; attempt < 3; attempt++) {
            port_ = free_port();
            if (port_ < 0) {
                return std::string("no free loopback port: ")
                    + std::strerror(errno);
            }
            why = spawn(exe);
            if (why.empty()) {
                return "";
            }
            stop(); // another process took the port first: try another
        }
        return why;
    }

    void stop()
    {
        context_.reset();
        if (pid_ <= 0) {
            return;
        }
        kill(pid_, SIGTERM);
        for (int i = 0; i < 500; i++) {
            if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            sleep_ms(10);
        }
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    redisContext *context() const { return context_.get(); }
    int           port() const { return port_; }

  private:
    std::string spawn(const std::string &exe)
    {
        const std::string        port = std::to_string(port_);
        std::vector<std::string> args = {exe};
        args.insert(args.end(), args_.begin(), args_.end());
        args.insert(args.end(),
                    {
                        "--port",
                        port,
                        "--bind",
                        "127.0.0.1",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--daemonize",
                        "no",
                        "--loglevel",
                        "warning",
                    });
        std::vector<char *> argv;
        for (std::string &a : args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);

        pid_ = fork();
        if (pid_ < 0) {
            return std::string("fork: ") + std::strerror(errno);
        }
        if (pid_ == 0) {
            // a test that crashes takes its server along
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            int null = open("/dev/null", O_RDWR);
            if (null >= 0) {
                dup2(null, STDIN_FILENO);
                dup2(null, STDOUT_FILENO);
                dup2(null, STDERR_FILENO);
            }
            execv(exe.c_str(), argv.data());
            _exit(127);
        }

        // PING until PONG, for at most 5 s
        for (int i = 0; i < 500; i++) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return exe + " on port " + port + " exited (status "
                    + std::to_string(status) + ") before it answered";
            }
            timeval tv{1, 0};
            Context c(redisConnectWithTimeout("127.0.0.1", port_, tv));
            if (c && c->err == 0) {
                Reply r = command(c.get(), {"PING"});
                if (r && r->type == REDIS_REPLY_STATUS
                    && std::string(r->str, r->len) == "PONG") {
                    context_ = std::move(c);
                    return "";
                }
            }
            sleep_ms(10);
        }
        return exe + " on port " + port + " did not answer PING within 5 s";
    }

    std::vector<std::string> args_;
    int                      port_ = -1;
    pid_t                    pid_ = -1;
    Context                  context_;
};

// --- reading results

inline std::string
str(const ThrottleResult &r)
{
    std::ostringstream s;
    s << "{limited=" << r.limited << " limit=" << r.limit
      << " remaining=" << r.remaining << " reset_after=" << r.reset_after_us
      << " retry_after=" << r.retry_after_us << "}";
    return s.str();
}

inline std::string
str(const Policy &p)
{
    std::ostringstream s;
    s << p.algorithm->name << " rate=" << p.rate.count << "/"
      << p.rate.period_us << "us burst=" << p.burst << " limit=" << p.limit
      << " T=" << p.emission_interval_us << " w=" << p.window_us;
    return s.str();
}

inline bool
same(const ThrottleResult &a, const ThrottleResult &b)
{
    return a.limited == b.limited && a.limit == b.limit
        && a.remaining == b.remaining && a.reset_after_us == b.reset_after_us
        && a.retry_after_us == b.retry_after_us;
}

// --- the fixture

class RedisScripts : public testing::Test {
  protected:
    static void SetUpTestSuite()
    {
        server_ = new RedisServer;
        error_ = new std::string(server_->start());
    }

    static void TearDownTestSuite()
    {
        server_->stop();
        delete server_;
        server_ = nullptr;
        delete error_;
        error_ = nullptr;
    }

    void SetUp() override
    {
        ASSERT_TRUE(error_->empty()) << *error_;
        Reply r = run({"FLUSHALL"});
        ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
        // EVALSHA below needs no NOSCRIPT fallback
        for (const Script *sc : lua::all) {
            r = run({"SCRIPT", "LOAD", std::string(sc->source)});
            ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << sc->name;
        }
    }

    static redisContext *redis() { return server_->context(); }

    static Reply run(const std::vector<std::string> &args)
    {
        Reply r = command(redis(), args);
        EXPECT_TRUE(r) << args[0] << ": " << redis()->errstr;
        return r;
    }

    static int64_t integer(const std::vector<std::string> &args)
    {
        return integer(run(args).get());
    }

    // Several commands in one round trip; their replies in order.
    static std::vector<Reply>
    pipeline(const std::vector<std::vector<std::string>> &commands)
    {
        const int64_t start = realtime_now_us();
        for (const std::vector<std::string> &args : commands) {
            std::vector<const char *> argv;
            std::vector<size_t>       argvlen;
            for (const std::string &a : args) {
                argv.push_back(a.data());
                argvlen.push_back(a.size());
            }
            redisAppendCommandArgv(redis(), static_cast<int>(argv.size()),
                                   argv.data(), argvlen.data());
        }
        std::vector<Reply> replies;
        for (size_t i = 0; i < commands.size(); i++) {
            void *r = nullptr;
            EXPECT_EQ(redisGetReply(redis(), &r), REDIS_OK) << redis()->errstr;
            replies.emplace_back(static_cast<redisReply *>(r));
        }
        round_trip_us_ = realtime_now_us() - start;
        return replies;
    }

    // Whether the last pipeline's key went on Redis's clock before
    // held_pttl() held it: held_pttl() found no key, and what the key had
    // left by the scripts ($left_us, by the virtual clock) was no more
    // than the round trip took (+1 ms: PEXPIRE rounds up). Redis then has
    // no state for it; a script that failed to write one would leave none
    // with time to spare.
    static bool gone_on_redis_clock(int64_t pttl, int64_t left_us)
    {
        return pttl == -2 && left_us > 0 && left_us <= round_trip_us_ + 1000;
    }

    // PTTL as the scripts left it, in a command that then holds the key
    // for kHoldMs more (Redis's clock must not drop what the virtual clock
    // still counts). A held key reads as what it had left when the
    // scripts last set it, less the real time since; past that, as gone
    // (-3: Redis still has its stale state). No key at all reads -2.
    static constexpr int64_t kHoldMs = 1'000'000'000'000; // ~31 years

    static std::vector<std::string> held_pttl(const std::string &key)
    {
        static const char *const kScript =
            "local t = redis.call('PTTL', KEYS[1])\n"
            "if t < 0 then return t end\n"
            "local hold = tonumber(ARGV[1])\n"
            "local left = t\n"
            "if t >= hold / 2 then left = t - hold end\n"
            "redis.call('PEXPIRE', KEYS[1], string.format('%d', left + hold))\n"
            "if left < 0 then return -3 end\n"
            "return left\n";
        return {"EVAL", kScript, "1", key, std::to_string(kHoldMs)};
    }

    static std::vector<std::string>
    evalsha(const Script &script, const std::string &key,
            const std::vector<std::string> &argv)
    {
        std::vector<std::string> args = {"EVALSHA", std::string(script.sha1),
                                         "1", key};
        args.insert(args.end(), argv.begin(), argv.end());
        return args;
    }

    // A script's reply, an array of integers (or one integer), as a vector.
    static std::vector<int64_t> integers(const Script     &script,
                                         const redisReply *r)
    {
        const std::string_view name = script.name;
        std::vector<int64_t>   out;
        if (r == nullptr) {
            ADD_FAILURE() << name << ": no reply: " << redis()->errstr;
        } else if (r->type == REDIS_REPLY_ERROR) {
            ADD_FAILURE() << name << ": " << std::string(r->str, r->len);
        } else if (r->type == REDIS_REPLY_INTEGER) {
            out.push_back(r->integer);
        } else if (r->type == REDIS_REPLY_ARRAY) {
            for (size_t i = 0; i < r->elements; i++) {
                const redisReply *e = r->element[i];
                if (e->type != REDIS_REPLY_INTEGER) {
                    ADD_FAILURE()
                        << name << ": element " << i << " is not an integer";
                    out.push_back(INT64_MIN);
                } else {
                    out.push_back(e->integer);
                }
            }
        } else {
            ADD_FAILURE() << name << ": unexpected reply type " << r->type;
        }
        return out;
    }

    static int64_t integer(const redisReply *r)
    {
        if (r == nullptr || r->type != REDIS_REPLY_INTEGER) {
            ADD_FAILURE() << "not an integer reply";
            return INT64_MIN;
        }
        return r->integer;
    }

    static std::vector<int64_t> eval(const Script                   &script,
                                     const std::string              &key,
                                     const std::vector<std::string> &argv)
    {
        return integers(script, run(evalsha(script, key, argv)).get());
    }

    // A script call as the module makes it, with the test-only now last.
    static std::vector<std::string> evalsha(const ScriptCall      &call,
                                            const std::string     &key,
                                            std::optional<int64_t> now = {})
    {
        std::vector<std::string> argv;
        for (size_t i = 0; i < call.args.n; i++) {
            argv.push_back(std::to_string(call.args.values[i]));
        }
        if (now) {
            argv.push_back(std::to_string(*now));
        }
        return evalsha(*call.script, key, argv);
    }

    // The decision script of a policy, with the test-only now.
    static const Script &decision_script(const Policy &p)
    {
        return *p.decision_call(0).script;
    }

    static std::vector<std::string>
    decision(const Policy &p, const std::string &key, int64_t now, int64_t cost)
    {
        return evalsha(p.decision_call(cost), key, now);
    }

    static std::vector<int64_t> decide_in_redis(const Policy      &p,
                                                const std::string &key,
                                                int64_t now, int64_t cost)
    {
        return integers(decision_script(p),
                        run(decision(p, key, now, cost)).get());
    }

    static ThrottleResult result(const std::vector<int64_t> &reply)
    {
        ThrottleResult r;
        r.limited = reply.at(0) != 0;
        r.limit = reply.at(1);
        r.remaining = reply.at(2);
        r.reset_after_us = reply.at(3);
        r.retry_after_us = reply.at(4);
        return r;
    }

    inline static int64_t      round_trip_us_ = 0;
    inline static RedisServer *server_ = nullptr;
    inline static std::string *error_ = nullptr;
};

// --- random timelines

inline int64_t
uniform(std::mt19937_64 &rng, int64_t lo, int64_t hi)
{
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

inline Policy
random_policy(std::mt19937_64 &rng, std::string_view algorithm,
              Mode mode = Mode::local)
{
    for (;;) {
        const int64_t window = kWindows[uniform(rng, 0, 3)];
        int64_t       count, burst;
        switch (uniform(rng, 0, 9)) {
        case 0:
            // large limits: for sliding_window the doubles round
            count = algorithm == "sliding_log"
                ? uniform(rng, 100, 900)
                : uniform(rng, 1000, 100'000'000);
            burst = uniform(rng, 0, 100);
            break;
        case 1:
        case 2:
            count = uniform(rng, 11, 100);
            burst = uniform(rng, 0, 20);
            break;
        default:
            count = uniform(rng, 1, 10);
            burst = uniform(rng, 0, 5);
            break;
        }
        if (algorithm == "gcra") {
            count = std::min(count, window);
        }
        auto p =
            testing_support::try_policy(algorithm, count, window, burst, mode);
        if (p) {
            return *p.value;
        }
    }
}

inline int64_t
random_cost(std::mt19937_64 &rng, int64_t limit)
{
    switch (uniform(rng, 0, 9)) {
    case 0:
        return 0;
    case 1:
    case 2:
    case 3:
    case 4:
        return uniform(rng, 1, 3);
    case 5:
        return uniform(rng, std::max<int64_t>(0, limit - 1), limit + 2);
    default:
        return uniform(rng, 0, limit + 2);
    }
}

// The next now: the previous one plus a gap of 0 .. 2.5 windows, often one
// on a window's edge (or one entry's window later), never behind the real
// clock.
inline int64_t
next_now(std::mt19937_64 &rng, int64_t prev, int64_t window)
{
    int64_t next;
    switch (uniform(rng, 0, 9)) {
    case 0:
        next = prev;
        break;
    case 1:
        next = prev + uniform(rng, 1, 1000);
        break;
    case 2: {
        // on the edge of the next window (or the one after), +-1 us
        const int64_t edge = prev - prev % window + window * uniform(rng, 1, 2);
        next = std::max(prev, edge + uniform(rng, -1, 1));
        break;
    }
    case 3:
        // exactly when the previous step's entries leave, +-1 us
        next = prev + window + uniform(rng, -1, 1);
        break;
    default:
        next = prev + uniform(rng, 0, window * 5 / 2);
        break;
    }
    return std::max(next, realtime_now_us());
}

} // namespace throttle::testing_support
