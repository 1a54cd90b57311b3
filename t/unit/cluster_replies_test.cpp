// SPDX-License-Identifier: BSD-2-Clause
// Redis Cluster replies no server sends, read as the transport reads them:
// redirections (MOVED, ASK) and the other errors that steer the transport,
// then CLUSTER SLOTS and CLUSTER SHARDS maps. The maps real servers send
// are in cluster_slots_test.cpp.
#include "cluster_support.hpp"
#include "redis_fixture.hpp"
#include "throttle/cluster.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace throttle {
namespace {

using testing_support::read_reply;
using testing_support::Reply;

// The host of the node a reply no server sent came from, as the transport
// gives it to the readers.
constexpr std::string_view kAnswering = "10.9.9.9";

// --- redirections and other errors

TEST(ErrorReply, Kinds)
{
    const std::pair<const char *, ErrorKind> kinds[] = {
        {"NOSCRIPT No matching script. Please use EVAL.", ErrorKind::noscript},
        {"NOSCRIPT", ErrorKind::noscript},
        {"TRYAGAIN Multiple keys request during rehashing of slot",
         ErrorKind::tryagain},
        {"CLUSTERDOWN The cluster is down", ErrorKind::clusterdown},
        {"CLUSTERDOWN", ErrorKind::clusterdown},
        {"READONLY You can't write against a read only replica.",
         ErrorKind::readonly},
        {"LOADING Redis is loading the dataset in memory", ErrorKind::loading},
        {"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
         "set to 'no'.",
         ErrorKind::masterdown},
        {"ERR unknown command", ErrorKind::other},
        {"WRONGTYPE Operation against a key", ErrorKind::other},
        {"", ErrorKind::other},
        {"NOSCRIPTS x", ErrorKind::other}, // a longer word
        {"LOADINGx", ErrorKind::other},
        {"noscript No matching", ErrorKind::other}, // Redis's words are upper
        {" NOSCRIPT", ErrorKind::other},
        {"ERR NOSCRIPT", ErrorKind::other},
    };
    for (const auto &[text, kind] : kinds) {
        EXPECT_EQ(read_error(text, kAnswering).kind, kind) << text;
    }
}

TEST(ErrorReply, Redirections)
{
    struct Redirection {
        const char      *text;
        ErrorKind        kind;
        unsigned         slot;
        std::string_view host;
        unsigned         port;
    };
    const Redirection redirections[] = {
        {"MOVED 3999 127.0.0.1:6381", ErrorKind::moved, 3999, "127.0.0.1",
         6381},
        // IPv6: the port follows the last colon
        {"ASK 16383 ::1:6381", ErrorKind::ask, 16383, "::1", 6381},
        // no host: the node that answered, at that port
        {"MOVED 0 :65535", ErrorKind::moved, 0, kAnswering, 65535},
        {"ASK 7 :6380", ErrorKind::ask, 7, kAnswering, 6380},
        // "?": a node announced by a host name it lacks; no one knows it,
        // and no node the transport has is called so
        {"MOVED 9 ?:6380", ErrorKind::moved, 9, "?", 6380},
        {"MOVED 12 redis-3.example:1", ErrorKind::moved, 12, "redis-3.example",
         1},
        {"ASK 00012 h:080", ErrorKind::ask, 12, "h", 80},
    };
    for (const Redirection &r : redirections) {
        const ErrorReply e = read_error(r.text, kAnswering);
        EXPECT_EQ(e.kind, r.kind) << r.text;
        EXPECT_EQ(e.slot, r.slot) << r.text;
        EXPECT_EQ(e.target.host, r.host) << r.text;
        EXPECT_EQ(e.target.port, r.port) << r.text;
    }
    // the answering host itself, not text of the reply's
    EXPECT_EQ(read_error("MOVED 0 :1", kAnswering).target.host.data(),
              kAnswering.data());
}

TEST(ErrorReply, MalformedRedirectionsAreOther)
{
    for (const char *text : {
             "MOVED",
             "MOVED ",
             "MOVED 3999",
             "MOVED 3999 ",
             "MOVED 3999 127.0.0.1",            // no port
             "MOVED 3999 127.0.0.1:",           // an empty port
             "MOVED 3999 127.0.0.1:0",          // port 0
             "MOVED 3999 127.0.0.1:65536",      // beyond 65535
             "MOVED 3999 127.0.0.1:4294967297", // 2^32 + 1: no wrap
             "MOVED 3999 127.0.0.1:99999999999999999999999",
             "MOVED 3999 127.0.0.1:+80",
             "MOVED 3999 127.0.0.1:-80",
             "MOVED 3999 127.0.0.1:80 ",
             "MOVED 3999 127.0.0.1:8x",
             "MOVED 3999 127.0.0.1:6381 trailing",
             "MOVED 3999  127.0.0.1:6381", // two spaces
             "MOVED 16384 127.0.0.1:6381", // beyond the slots
             "MOVED 4294967296 127.0.0.1:6381",
             "MOVED 18446744073709551616 127.0.0.1:6381",
             "MOVED -1 127.0.0.1:6381",
             "MOVED +1 127.0.0.1:6381",
             "MOVED 0x10 127.0.0.1:6381",
             "MOVED  3999 127.0.0.1:6381",
             "MOVED 3999:127.0.0.1:6381",
             "ASK",
             "ASK 1",
             "ASK 1 h",
             "ASK 1 h:0",
             "ASK 99999 h:1",
         })
    {
        const ErrorReply e = read_error(text, kAnswering);
        EXPECT_EQ(e.kind, ErrorKind::other) << text;
        EXPECT_EQ(e.slot, 0u) << text;
        EXPECT_EQ(e.target.host, "") << text;
        EXPECT_EQ(e.target.port, 0u) << text;
    }
    // text is read by its length: no NUL ends it
    EXPECT_EQ(
        read_error(std::string_view("MOVED 1 h:80\0", 13), kAnswering).kind,
        ErrorKind::other);
    EXPECT_EQ(read_error(std::string_view("MOVED 1 h:8012", 12), kAnswering)
                  .target.port,
              80u);
}

// --- slot maps no server sends

// A reader's result: the ranges it gave, or what was wrong (both point
// into the reply, kept with them).
struct MapRead {
    Reply                  reply;
    const char            *error = nullptr;
    std::vector<SlotRange> ranges;
};

bool
collect(void *data, const SlotRange &range)
{
    static_cast<std::vector<SlotRange> *>(data)->push_back(range);
    return true;
}

// "first-last host:port, ...", or the error.
std::string
ranges(const MapRead &read)
{
    if (read.error != nullptr) {
        return read.error;
    }
    std::string out;
    for (const SlotRange &r : read.ranges) {
        out += (out.empty() ? "" : ", ") + std::to_string(r.first) + "-"
            + std::to_string(r.last) + " " + std::string(r.master.host) + ":"
            + std::to_string(r.master.port);
    }
    return out;
}

// Each range's master_name, joined by ",".
std::string
names(const MapRead &read)
{
    std::string out;
    for (const SlotRange &r : read.ranges) {
        out += (&r == &read.ranges[0] ? "" : ",") + std::string(r.master_name);
    }
    return out;
}

MapRead
slots_of(const std::string &resp)
{
    MapRead read;
    read.reply = read_reply(resp);
    EXPECT_TRUE(read.reply) << resp;
    read.error =
        read_cluster_slots(read.reply.get(), kAnswering, collect, &read.ranges);
    return read;
}

MapRead
shards_of(const std::string &resp, bool tls = false)
{
    MapRead read;
    read.reply = read_reply(resp);
    EXPECT_TRUE(read.reply) << resp;
    read.error = read_cluster_shards(read.reply.get(), kAnswering, collect,
                                     &read.ranges, tls);
    return read;
}

std::string
bulk(std::string_view s)
{
    return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// [first, last, [host, port, "id"]]
std::string
slots_entry(const std::string &first, const std::string &last,
            const std::string &host, const std::string &port)
{
    return "*3\r\n" + first + last + "*3\r\n" + host + port + bulk("id");
}

TEST(SlotsReply, Malformed)
{
    const std::string h = bulk("10.0.0.1");
    for (const std::string &resp : std::vector<std::string>{
             std::string("+OK\r\n"), std::string("$5\r\nslots\r\n"),
             std::string("*1\r\n:1\r\n"),
             "*1\r\n*2\r\n:0\r\n:1\r\n", // no master
             "*1\r\n" + slots_entry(":0\r\n", ":16384\r\n", h, ":7000\r\n"),
             "*1\r\n" + slots_entry(":-1\r\n", ":5\r\n", h, ":7000\r\n"),
             "*1\r\n" + slots_entry(":6\r\n", ":5\r\n", h, ":7000\r\n"),
             "*1\r\n" + slots_entry(bulk("0"), ":5\r\n", h, ":7000\r\n"),
             "*1\r\n" + slots_entry(":0\r\n", ":5\r\n", h, ":0\r\n"),
             "*1\r\n" + slots_entry(":0\r\n", ":5\r\n", h, ":70000\r\n"),
             "*1\r\n" + slots_entry(":0\r\n", ":5\r\n", h, bulk("7000")),
             "*1\r\n" + slots_entry(":0\r\n", ":5\r\n", ":1\r\n", ":7000\r\n"),
             "*1\r\n" + slots_entry(":0\r\n", ":5\r\n", "*0\r\n", ":7000\r\n"),
             std::string("*1\r\n*3\r\n:0\r\n:5\r\n$2\r\nh1\r\n"),
             std::string("*1\r\n*3\r\n:0\r\n:5\r\n*1\r\n$2\r\nh1\r\n"),
             "*2\r\n" + slots_entry(":0\r\n", ":5\r\n", h, ":7000\r\n")
                 + ":1\r\n", // a good range, then a bad one
         })
    {
        EXPECT_NE(slots_of(resp).error, nullptr) << resp;
    }
    EXPECT_STREQ(slots_of("-CLUSTERDOWN Hash slot not served\r\n").error,
                 "CLUSTERDOWN Hash slot not served");
    EXPECT_STREQ(read_cluster_slots(nullptr, kAnswering, collect, nullptr),
                 "no reply");
}

TEST(SlotsReply, UnknownEndpointsAreSkippedEmptyOnesAreTheAnswering)
{
    const MapRead read = slots_of(
        "*6\r\n" + slots_entry(":0\r\n", ":9\r\n", bulk("?"), ":7000\r\n")
        + slots_entry(":10\r\n", ":19\r\n", bulk(""), ":7001\r\n")
        + slots_entry(":20\r\n", ":29\r\n", "$-1\r\n", ":7002\r\n")
        // a nil array reads as nil too
        + slots_entry(":30\r\n", ":34\r\n", "*-1\r\n", ":7004\r\n")
        + slots_entry(":35\r\n", ":39\r\n", bulk("::1"), ":7003\r\n")
        // a replica after the master, as Redis sends them
        + "*4\r\n:40\r\n:16383\r\n*2\r\n" + bulk("h") + ":1\r\n*2\r\n"
        + bulk("r") + ":2\r\n");
    // "?": nobody knows; "" and nil: the node that answered, at that port
    EXPECT_EQ(ranges(read),
              "10-19 10.9.9.9:7001, 20-29 10.9.9.9:7002, 30-34 10.9.9.9:7004, "
              "35-39 ::1:7003, 40-16383 h:1");
    EXPECT_EQ(read.ranges[0].master.host.data(), kAnswering.data());
    // an empty map: a cluster with no slots yet
    EXPECT_EQ(slots_of("*0\r\n").error, nullptr);
}

// [first, last, [endpoint, port, "id", metadata]]
std::string
slots_entry_with(const std::string &bounds, const std::string &endpoint,
                 const std::string &metadata)
{
    return "*3\r\n" + bounds + "*4\r\n" + endpoint + ":7000\r\n" + bulk("id")
        + metadata;
}

TEST(SlotsReply, AHostNameIsReadAsTheIpBesideIt)
{
    const std::string ip = "*2\r\n" + bulk("ip");
    const MapRead     read = slots_of(
            "*6\r\n"
            + slots_entry_with(":0\r\n:9\r\n", bulk("redis-1.example"),
                               ip + bulk("10.0.0.1"))
            // nil and "?" mean what they mean, whatever the ip
            + slots_entry_with(":10\r\n:19\r\n", "$-1\r\n", ip + bulk("10.0.0.2"))
            + slots_entry_with(":20\r\n:29\r\n", bulk("?"), ip + bulk("10.0.0.3"))
            // no ip to read: the name
            + slots_entry_with(":30\r\n:39\r\n", bulk("redis-4.example"), "*0\r\n")
            + slots_entry_with(":40\r\n:49\r\n", bulk("redis-5.example"),
                               ip + bulk(""))
            + slots_entry_with(":50\r\n:59\r\n", bulk("redis-6.example"),
                               ":1\r\n"));
    EXPECT_EQ(ranges(read),
              "0-9 10.0.0.1:7000, 10-19 10.9.9.9:7000, "
              "30-39 redis-4.example:7000, "
              "40-49 redis-5.example:7000, "
              "50-59 redis-6.example:7000");
    // the name MOVED gives, where the host is the ip beside it
    EXPECT_EQ(names(read), "redis-1.example,,,,");
}

// A node of CLUSTER SHARDS: its fields, names and values as RESP.
std::string
node(const std::vector<std::pair<std::string, std::string>> &fields)
{
    std::string out = "*" + std::to_string(2 * fields.size()) + "\r\n";
    for (const auto &[name, value] : fields) {
        out += bulk(name) + value;
    }
    return out;
}

std::string
master_node(const std::string &host_field, const std::string &host,
            const std::string &port_field = "port",
            const std::string &port = ":7000\r\n")
{
    return node({{"id", bulk("abc")},
                 {port_field, port},
                 {host_field, bulk(host)},
                 {"role", bulk("master")},
                 {"health", bulk("online")}});
}

// A shard: its slot bounds (RESP integers) and its nodes.
std::string
shard(const std::string &slots, size_t n_bounds,
      const std::vector<std::string> &nodes)
{
    std::string out = "*4\r\n" + bulk("slots") + "*" + std::to_string(n_bounds)
        + "\r\n" + slots + bulk("nodes") + "*" + std::to_string(nodes.size())
        + "\r\n";
    for (const std::string &n : nodes) {
        out += n;
    }
    return out;
}

TEST(ShardsReply, MastersAndTheirAddresses)
{
    const std::string replica = node({{"port", ":7100\r\n"},
                                      {"ip", bulk("10.0.0.9")},
                                      {"role", bulk("replica")},
                                      {"health", bulk("online")}});
    const std::string failed = node({{"port", ":7200\r\n"},
                                     {"ip", bulk("10.0.0.8")},
                                     {"role", bulk("master")},
                                     {"health", bulk("fail")}});
    const std::string reply = "*4\r\n"
        // two ranges; a failed master first, then the online one
        + shard(":0\r\n:9\r\n:20\r\n:29\r\n", 4,
                {failed, replica, master_node("ip", "10.0.0.1")})
        // no "ip": the endpoint
        + shard(":10\r\n:19\r\n", 2,
                {master_node("endpoint", "redis-2.example", "tls-port",
                             ":7443\r\n")})
        // no online master: skipped
        + shard(":30\r\n:39\r\n", 2, {failed, replica})
        // a hostname not known: skipped
        + shard(":40\r\n:49\r\n", 2, {master_node("endpoint", "?")});

    // the second master has no "port": read over TLS only
    const MapRead read = shards_of(reply, false);
    EXPECT_STREQ(read.error,
                 "unexpected reply to CLUSTER SHARDS: a master's "
                 "port is not in 1..65535");
    EXPECT_EQ(ranges(shards_of(reply, true)),
              "0-9 10.0.0.1:7000, 20-29 10.0.0.1:7000, "
              "10-19 redis-2.example:7443");

    const std::string both = node({{"port", ":7000\r\n"},
                                   {"tls-port", ":7443\r\n"},
                                   {"ip", bulk("10.0.0.2")},
                                   {"endpoint", bulk("ignored")},
                                   {"role", bulk("master")},
                                   {"health", bulk("online")}});
    const std::string good = "*2\r\n"
        + shard(":0\r\n:9\r\n:20\r\n:29\r\n", 4,
                {failed, replica, master_node("ip", "10.0.0.1")})
        + shard(":10\r\n:19\r\n", 2, {replica, both});
    EXPECT_EQ(ranges(shards_of(good, false)),
              "0-9 10.0.0.1:7000, 20-29 10.0.0.1:7000, 10-19 10.0.0.2:7000");
    EXPECT_EQ(ranges(shards_of(good, true)),
              "0-9 10.0.0.1:7000, 20-29 10.0.0.1:7000, 10-19 10.0.0.2:7443");
}

// An online master whose "endpoint" and "ip" are these RESP values (none
// when empty).
std::string
master_at(const std::string &endpoint, const std::string &ip)
{
    std::vector<std::pair<std::string, std::string>> fields = {
        {"port", ":7000\r\n"},
        {"role", bulk("master")},
        {"health", bulk("online")}};
    if (!endpoint.empty()) {
        fields.emplace_back("endpoint", endpoint);
    }
    if (!ip.empty()) {
        fields.emplace_back("ip", ip);
    }
    return node(fields);
}

// As in CLUSTER SLOTS: the endpoint decides, nil and "" are the node that
// answered, "?" is unknown, and a host name is read as the "ip" beside it.
TEST(ShardsReply, EndpointsAsInSlots)
{
    const std::string reply = "*6\r\n"
        + shard(":0\r\n:9\r\n", 2, {master_at("$-1\r\n", bulk("10.0.0.1"))})
        // as a lone node sends it
        + shard(":10\r\n:19\r\n", 2, {master_at(bulk(""), bulk(""))})
        + shard(":20\r\n:29\r\n", 2, {master_at(bulk("?"), bulk("10.0.0.3"))})
        + shard(":30\r\n:39\r\n", 2,
                {master_at(bulk("redis-4.example"), bulk("10.0.0.4"))})
        // no endpoint: the ip; an empty ip beside a name: the name
        + shard(":40\r\n:49\r\n", 2, {master_at("", bulk("10.0.0.5"))})
        + shard(":50\r\n:59\r\n", 2,
                {master_at(bulk("redis-6.example"), bulk(""))});
    EXPECT_EQ(ranges(shards_of(reply)),
              "0-9 10.9.9.9:7000, 10-19 10.9.9.9:7000, 30-39 10.0.0.4:7000, "
              "40-49 10.0.0.5:7000, 50-59 redis-6.example:7000");
    EXPECT_EQ(shards_of(reply).ranges[0].master.host.data(), kAnswering.data());
    EXPECT_EQ(names(shards_of(reply)), ",,redis-4.example,,");
}

TEST(ShardsReply, Malformed)
{
    const std::string m = master_node("ip", "10.0.0.1");
    for (const std::string &resp : std::vector<std::string>{
             std::string("+OK\r\n"),
             std::string("*1\r\n:1\r\n"),
             std::string("*1\r\n*1\r\n") + bulk("slots"), // odd map
             "*1\r\n*2\r\n:1\r\n" + bulk("x"),            // a name not a string
             "*1\r\n*2\r\n" + bulk("nodes") + "*1\r\n" + m,         // no slots
             "*1\r\n*2\r\n" + bulk("slots") + "*2\r\n:0\r\n:1\r\n", // no nodes
             "*1\r\n" + shard(":0\r\n", 1, {m}), // half a pair
             "*1\r\n" + shard(":0\r\n:16384\r\n", 2, {m}),
             "*1\r\n" + shard(":5\r\n:4\r\n", 2, {m}),
             "*1\r\n" + shard(":-1\r\n:4\r\n", 2, {m}),
             "*1\r\n" + shard(bulk("0") + ":4\r\n", 2, {m}),
             "*1\r\n" + shard(":0\r\n:4\r\n", 2, {":1\r\n"}),
             "*1\r\n" + shard(":0\r\n:4\r\n", 2, {"*1\r\n" + bulk("ip")}),
             // no role, no health
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {node({{"ip", bulk("h")}, {"port", ":1\r\n"}})}),
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {node({{"ip", bulk("h")},
                                {"port", ":1\r\n"},
                                {"role", ":1\r\n"},
                                {"health", bulk("online")}})}),
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {master_node("ip", "h", "port", ":0\r\n")}),
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {master_node("ip", "h", "port", ":70000\r\n")}),
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {master_node("ip", "h", "port", bulk("7000"))}),
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {master_node("hostname", "h")}), // no ip
             "*1\r\n"
                 + shard(":0\r\n:4\r\n", 2,
                         {node({{"ip", ":1\r\n"},
                                {"port", ":1\r\n"},
                                {"role", bulk("master")},
                                {"health", bulk("online")}})}),
         })
    {
        EXPECT_NE(shards_of(resp).error, nullptr) << resp;
    }
    EXPECT_STREQ(shards_of("-ERR unknown subcommand 'SHARDS'\r\n").error,
                 "ERR unknown subcommand 'SHARDS'");
    EXPECT_STREQ(
        read_cluster_shards(nullptr, kAnswering, collect, nullptr, false),
        "no reply");
    EXPECT_EQ(shards_of("*0\r\n").error, nullptr);
}

} // namespace
} // namespace throttle
