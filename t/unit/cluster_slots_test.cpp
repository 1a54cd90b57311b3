// SPDX-License-Identifier: BSD-2-Clause
// Redis Cluster's key slots and slot maps as real servers give them: key
// slots against Redis's own CLUSTER KEYSLOT, then the slot maps (and a
// MOVED) of a lone node and of a real 3-master cluster on loopback, each
// reply read from the bytes the server sent. The maps no server sends are
// in cluster_replies_test.cpp.
#include "cluster_support.hpp"
#include "redis_fixture.hpp"
#include "throttle/cluster.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace throttle {
namespace {

using testing_support::ask;
using testing_support::command;
using testing_support::raw_reply;
using testing_support::read_reply;
using testing_support::RedisServer;
using testing_support::Reply;
using testing_support::TempDir;

// The servers here answer on loopback.
constexpr std::string_view kLoopback = "127.0.0.1";

// Starts a redis-server with cluster-enabled, its bus on port `bus`, its
// nodes.conf at `conf`: "" once it runs, else why not.
std::string
start_cluster_node(RedisServer &server, const std::string &conf, int bus)
{
    return server.start({"--cluster-enabled", "yes", "--cluster-port",
                         std::to_string(bus), "--cluster-config-file", conf});
}

// --- key slots

TEST(KeySlot, TheClusterSpecsExamples)
{
    EXPECT_EQ(key_slot("123456789"), 0x31C3u);
    EXPECT_EQ(key_slot("{user1000}.following"),
              key_slot("{user1000}.followers"));
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
    EXPECT_EQ(key_slot("foo{}{bar}"), 8363u); // the whole name
    EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
    EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
    EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
    EXPECT_EQ(key_slot(""), 0u);
}

// Random names, some of bytes, some of text, with braces in places.
std::vector<std::string>
random_names(size_t n)
{
    std::mt19937_64          rng(20261124);
    std::vector<std::string> names;
    const std::string        text = "abcXYZ019:-_{}{}{}";
    for (size_t i = 0; i < n; i++) {
        const size_t len = rng() % 24;
        std::string  name;
        for (size_t j = 0; j < len; j++) {
            name +=
                i % 2 ? static_cast<char>(rng()) : text[rng() % text.size()];
        }
        names.push_back(name);
    }
    return names;
}

TEST(KeySlot, AsRedisComputesIt)
{
    TempDir     dir;
    RedisServer server;
    ASSERT_EQ(start_cluster_node(server, dir.path() + "/nodes.conf",
                                 testing_support::free_port()),
              "");

    const std::vector<std::string> names = random_names(4000);
    for (const std::string &name : names) {
        const char  *argv[] = {"CLUSTER", "KEYSLOT", name.data()};
        const size_t argvlen[] = {7, 7, name.size()};
        redisAppendCommandArgv(server.context(), 3, argv, argvlen);
    }
    for (const std::string &name : names) {
        void *r = nullptr;
        ASSERT_EQ(redisGetReply(server.context(), &r), REDIS_OK);
        Reply reply(static_cast<redisReply *>(r));
        ASSERT_EQ(reply->type, REDIS_REPLY_INTEGER);
        EXPECT_EQ(key_slot(name), reply->integer)
            << testing::PrintToString(name);
    }
    server.stop();
}

// --- slot maps

// The slots of a map, as read_cluster_slots() or read_cluster_shards() gave
// them: slot -> "host:port".
bool
add_owner(void *data, const SlotRange &range)
{
    auto *owners = static_cast<std::map<unsigned, std::string> *>(data);
    for (unsigned s = range.first; s <= range.last; s++) {
        (*owners)[s] = std::string(range.master.host) + ":"
            + std::to_string(range.master.port);
    }
    return true;
}

// Both maps of the node at `port`, as read by the readers: equal, or the
// test fails.
std::map<unsigned, std::string>
slot_maps_of(int port)
{
    std::map<unsigned, std::string> slots, shards;
    Reply                           r = ask(port, {"CLUSTER", "SLOTS"});
    EXPECT_EQ(read_cluster_slots(r.get(), kLoopback, add_owner, &slots),
              nullptr);
    r = ask(port, {"CLUSTER", "SHARDS"});
    for (bool tls : {false, true}) {
        shards.clear();
        EXPECT_EQ(
            read_cluster_shards(r.get(), kLoopback, add_owner, &shards, tls),
            nullptr);
        EXPECT_EQ(shards, slots) << "CLUSTER SHARDS of " << port;
    }
    return slots;
}

// A node that has every slot and has met no other knows no address of its
// own: as each endpoint type has it, it says "" (ip), nil
// (unknown-endpoint) or "?" (hostname, none announced) in both maps.
TEST(SlotMaps, ALoneNodesEndpoints)
{
    TempDir     dir;
    RedisServer server;
    ASSERT_EQ(start_cluster_node(server, dir.path() + "/nodes.conf",
                                 testing_support::free_port()),
              "");
    Reply r =
        command(server.context(), {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
    const std::string port = std::to_string(server.port());

    struct Case {
        const char *type;
        const char *host; // in CLUSTER SLOTS, as RESP
        size_t      slots;
    };
    for (const Case &c : {Case{"ip", "$0\r\n\r\n", kClusterSlots},
                          Case{"unknown-endpoint", "$-1\r\n", kClusterSlots},
                          Case{"hostname", "$1\r\n?\r\n", 0}})
    {
        r = command(
            server.context(),
            {"CONFIG", "SET", "cluster-preferred-endpoint-type", c.type});
        ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << c.type;
        const std::string bytes =
            raw_reply(server.port(), {"CLUSTER", "SLOTS"});
        EXPECT_NE(bytes.find(std::string("*4\r\n") + c.host + ":" + port),
                  std::string::npos)
            << c.type << ": " << bytes;
        // "" and nil: the node asked, at the port given; "?": none
        const std::map<unsigned, std::string> slots =
            slot_maps_of(server.port());
        EXPECT_EQ(slots.size(), c.slots) << c.type;
        for (const auto &[slot, owner] : slots) {
            ASSERT_EQ(owner, "127.0.0.1:" + port)
                << c.type << ", slot " << slot;
        }
    }
    server.stop();
}

// Three masters on loopback, each with slot ranges of its own.
class RealCluster : public testing::Test {
  protected:
    static constexpr size_t kMasters = 3;
    // (node, first, last): node 0 has two ranges
    static constexpr std::array<std::array<unsigned, 3>, 4> kRanges = {{
        {0, 0, 4000},
        {1, 4001, 9000},
        {2, 9001, 12000},
        {0, 12001, 16383},
    }};

    void SetUp() override
    {
        for (size_t i = 0; i < kMasters; i++) {
            buses_[i] = testing_support::free_port();
            ASSERT_EQ(start_cluster_node(nodes_[i],
                                         dir_.path() + "/nodes-"
                                             + std::to_string(i) + ".conf",
                                         buses_[i]),
                      "");
        }
        for (const auto &[node, first, last] : kRanges) {
            Reply r = command(nodes_[node].context(),
                              {"CLUSTER", "ADDSLOTSRANGE",
                               std::to_string(first), std::to_string(last)});
            ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
        }
        // Every pair meets at once: nodes that wait for a third to
        // introduce them wait for its pings, a second or more each.
        for (size_t i = 0; i < kMasters; i++) {
            for (size_t j = i + 1; j < kMasters; j++) {
                Reply r = command(nodes_[i].context(),
                                  {"CLUSTER", "MEET", "127.0.0.1",
                                   std::to_string(nodes_[j].port()),
                                   std::to_string(buses_[j])});
                ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
            }
        }
        ASSERT_TRUE(wait_for_state_ok()) << cluster_info();
    }

    void TearDown() override
    {
        for (RedisServer &node : nodes_) {
            node.stop();
        }
    }

    // Whether every node says cluster_state:ok within 30 s. A cluster forms
    // in 2 to 5 s on a quiet machine; the bound is for a loaded one.
    bool wait_for_state_ok()
    {
        for (int i = 0; i < 3000; i++) {
            size_t ok = 0;
            for (RedisServer &node : nodes_) {
                Reply r = command(node.context(), {"CLUSTER", "INFO"});
                ok += r && r->type == REDIS_REPLY_STRING
                    && std::string_view(r->str, r->len).find("cluster_state:ok")
                        != std::string_view::npos;
            }
            if (ok == kMasters) {
                return true;
            }
            testing_support::sleep_ms(10);
        }
        return false;
    }

    // What each node says of the cluster, for a setup that failed.
    std::string cluster_info()
    {
        std::string info = "no cluster_state:ok within 30 s";
        for (RedisServer &node : nodes_) {
            for (const char *what : {"INFO", "NODES"}) {
                Reply r = command(node.context(), {"CLUSTER", what});
                info += "\nCLUSTER " + std::string(what) + " of "
                    + std::to_string(node.port()) + ":\n"
                    + (r && r->type == REDIS_REPLY_STRING
                           ? std::string(r->str, r->len)
                           : std::string("(no answer)"));
            }
        }
        return info;
    }

    // Each slot's master, "host:port", as CLUSTER NODES says: a line per
    // node, "<id> <ip:port@bus[,hostname]> <flags> ... <slot ranges>".
    std::map<unsigned, std::string> slot_owners(RedisServer &node)
    {
        std::map<unsigned, std::string> owners;
        Reply r = command(node.context(), {"CLUSTER", "NODES"});
        EXPECT_TRUE(r && r->type == REDIS_REPLY_STRING);
        std::istringstream lines(std::string(r->str, r->len));
        for (std::string line; std::getline(lines, line);) {
            std::istringstream       words(line);
            std::vector<std::string> w;
            for (std::string word; words >> word;) {
                w.push_back(word);
            }
            if (w.size() < 8 || w[2].find("master") == std::string::npos) {
                continue;
            }
            const std::string address = w[1].substr(0, w[1].find('@'));
            for (size_t i = 8; i < w.size(); i++) {
                const size_t   dash = w[i].find('-');
                const unsigned first = static_cast<unsigned>(std::stoul(w[i]));
                const unsigned last = dash == std::string::npos
                    ? first
                    : static_cast<unsigned>(std::stoul(w[i].substr(dash + 1)));
                for (unsigned s = first; s <= last; s++) {
                    owners[s] = address;
                }
            }
        }
        return owners;
    }

    // CONFIG SET on node i: whether it took it.
    bool set(size_t i, const std::string &name, const std::string &value)
    {
        Reply r = command(nodes_[i].context(), {"CONFIG", "SET", name, value});
        return r && r->type == REDIS_REPLY_STATUS;
    }

    // What node 0 answers `key` of another node's slot, read:
    // "<host:port as Redis gave it> -> <host:port as read_error() read it>".
    std::string moved_from_0(const std::string &key)
    {
        Reply r = ask(nodes_[0].port(), {"GET", key});
        EXPECT_EQ(r->type, REDIS_REPLY_ERROR);
        const std::string text(r->str, r->len);
        const ErrorReply  e = read_error(text, kLoopback);
        EXPECT_EQ(e.kind, ErrorKind::moved) << text;
        return text.substr(text.rfind(' ') + 1) + " -> "
            + std::string(e.target.host) + ":" + std::to_string(e.target.port);
    }

    // Whether node 0 knows `n` host names (its own among them) within 15 s:
    // the others' come with their pings, a second or two apart.
    bool names_reach_node_0(size_t n)
    {
        for (int i = 0; i < 1500; i++) {
            Reply r = command(nodes_[0].context(), {"CLUSTER", "NODES"});
            std::string_view nodes(r->str, r->len);
            size_t           count = 0;
            for (size_t at = nodes.find(".example");
                 at != std::string_view::npos;
                 at = nodes.find(".example", at + 1))
            {
                count++;
            }
            if (count == n) {
                return true;
            }
            testing_support::sleep_ms(10);
        }
        return false;
    }

    TempDir                           dir_;
    std::array<RedisServer, kMasters> nodes_;
    std::array<int, kMasters>         buses_{};
};

// (one test: a cluster takes two seconds to form)
TEST_F(RealCluster, SlotMapsAreWhatClusterNodesSays)
{
    for (RedisServer &node : nodes_) {
        const std::map<unsigned, std::string> expected = slot_owners(node);
        ASSERT_EQ(expected.size(), kClusterSlots);

        EXPECT_EQ(slot_maps_of(node.port()), expected)
            << "CLUSTER SLOTS of " << node.port();
    }
    // a false from the callback stops the reading
    auto first_only = [](void *data, const SlotRange &) {
        return ++*static_cast<int *>(data) < 1;
    };
    int   calls = 0;
    Reply r = ask(nodes_[1].port(), {"CLUSTER", "SLOTS"});
    EXPECT_STREQ(read_cluster_slots(r.get(), kLoopback, first_only, &calls),
                 "stopped");
    EXPECT_EQ(calls, 1);
    calls = 0;
    r = ask(nodes_[1].port(), {"CLUSTER", "SHARDS"});
    EXPECT_STREQ(
        read_cluster_shards(r.get(), kLoopback, first_only, &calls, false),
        "stopped");
    EXPECT_EQ(calls, 1);

    // the ranges as assigned, node 0's two among them
    EXPECT_EQ(slot_owners(nodes_[0])[16383],
              "127.0.0.1:" + std::to_string(nodes_[0].port()));
    EXPECT_EQ(slot_owners(nodes_[0])[9000],
              "127.0.0.1:" + std::to_string(nodes_[1].port()));
}

// What node 0 answers with each endpoint type, read: its maps as CLUSTER
// NODES has them (by address), and a MOVED for a key of node 1.
TEST_F(RealCluster, EndpointTypes)
{
    const std::map<unsigned, std::string> expected = slot_owners(nodes_[0]);
    const std::string port_1 = std::to_string(nodes_[1].port());
    std::string       key = "k"; // a key of node 1's slots
    while (key_slot(key) < 4001 || key_slot(key) > 9000) {
        key += "k";
    }

    // nil in the maps, no host in MOVED: node 0's own address
    ASSERT_TRUE(set(0, "cluster-preferred-endpoint-type", "unknown-endpoint"));
    EXPECT_EQ(slot_maps_of(nodes_[0].port()), expected);
    EXPECT_EQ(moved_from_0(key), ":" + port_1 + " -> 127.0.0.1:" + port_1);

    // host names, node 1's not announced yet: "?", its slots skipped
    ASSERT_TRUE(set(0, "cluster-preferred-endpoint-type", "hostname"));
    ASSERT_TRUE(set(0, "cluster-announce-hostname", "node0.example"));
    ASSERT_TRUE(set(2, "cluster-announce-hostname", "node2.example"));
    ASSERT_TRUE(names_reach_node_0(2));
    std::map<unsigned, std::string> known = expected;
    for (unsigned s = 4001; s <= 9000; s++) {
        known.erase(s);
    }
    EXPECT_EQ(slot_maps_of(nodes_[0].port()), known);
    EXPECT_EQ(moved_from_0(key), "?:" + port_1 + " -> ?:" + port_1);

    // every name announced: each map gives the ip beside it, MOVED the name
    ASSERT_TRUE(set(1, "cluster-announce-hostname", "node1.example"));
    ASSERT_TRUE(names_reach_node_0(3));
    const std::string bytes = raw_reply(nodes_[0].port(), {"CLUSTER", "SLOTS"});
    EXPECT_NE(bytes.find("$13\r\nnode1.example\r\n:" + port_1), bytes.npos)
        << bytes;
    EXPECT_EQ(slot_maps_of(nodes_[0].port()), expected);
    EXPECT_EQ(moved_from_0(key),
              "node1.example:" + port_1 + " -> node1.example:" + port_1);
    // and the name beside each address, as MOVED gives it
    std::string named;
    Reply       slots = read_reply(bytes);
    read_cluster_slots(
        slots.get(), kLoopback,
        [](void *data, const SlotRange &range) {
            *static_cast<std::string *>(data) +=
                std::string(range.master_name) + " ";
            return true;
        },
        &named);
    EXPECT_EQ(named,
              "node0.example node1.example node2.example node0.example ");
}

} // namespace
} // namespace throttle
