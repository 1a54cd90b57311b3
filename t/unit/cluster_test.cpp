// SPDX-License-Identifier: BSD-2-Clause
// Redis Cluster and Sentinel: key slots against Redis's own CLUSTER
// KEYSLOT, the slot maps of a real 3-master cluster on loopback, a real
// sentinel's answers and real servers' roles, each reply read from the
// bytes the server sent by the reader the transport reads with; then
// replies no server sends.
#include "redis_fixture.hpp"
#include "throttle/cluster.hpp"
#include "throttle/redis.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace throttle {
namespace {

using testing_support::command;
using testing_support::RedisServer;
using testing_support::Reply;

// The host of the node a reply no server sent came from, as the transport
// gives it to the readers; the servers here answer on loopback.
constexpr std::string_view kAnswering = "10.9.9.9";
constexpr std::string_view kLoopback = "127.0.0.1";

// --- replies as the transport reads them

// A reply read from RESP bytes by open_reply_reader(); null if the bytes
// are not one whole reply.
Reply
read_reply(const std::string &bytes)
{
    redisReader *reader = open_reply_reader();
    void        *reply = nullptr;
    if (redisReaderFeed(reader, bytes.data(), bytes.size()) != REDIS_OK
        || redisReaderGetReply(reader, &reply) != REDIS_OK)
    {
        reply = nullptr;
    }
    redisReaderFree(reader);
    return Reply(static_cast<redisReply *>(reply));
}

std::string
encode(const std::vector<std::string> &args)
{
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string &a : args) {
        out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    }
    return out;
}

// The bytes a server on loopback sends back for one command, as they come
// off a socket; empty if none came within 5 s.
std::string
raw_reply(int port, const std::vector<std::string> &args)
{
    const int   fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    const std::string request = encode(args);
    std::string       bytes;
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0
        && write(fd, request.data(), request.size())
            == static_cast<ssize_t>(request.size()))
    {
        char    buf[65536];
        ssize_t n;
        while (!read_reply(bytes) && (n = read(fd, buf, sizeof buf)) > 0) {
            bytes.append(buf, static_cast<size_t>(n));
        }
    }
    close(fd);
    return bytes;
}

Reply
ask(int port, const std::vector<std::string> &args)
{
    Reply r = read_reply(raw_reply(port, args));
    EXPECT_TRUE(r) << args[0] << " to port " << port << ": no reply";
    return r;
}

// A directory of the test's own, removed with it.
class TempDir {
  public:
    TempDir()
    {
        std::string templ =
            (std::filesystem::temp_directory_path() / "throttle-XXXXXX")
                .string();
        path_ = mkdtemp(templ.data()) != nullptr ? templ : "";
    }
    ~TempDir()
    {
        if (!path_.empty()) {
            std::filesystem::remove_all(path_);
        }
    }
    const std::string &path() const { return path_; }

  private:
    std::string path_;
};

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
        for (size_t i = 1; i < kMasters; i++) {
            Reply r = command(nodes_[0].context(),
                              {"CLUSTER", "MEET", "127.0.0.1",
                               std::to_string(nodes_[i].port()),
                               std::to_string(buses_[i])});
            ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
        }
        ASSERT_TRUE(wait_for_state_ok()) << "no cluster_state:ok within 10 s";
    }

    void TearDown() override
    {
        for (RedisServer &node : nodes_) {
            node.stop();
        }
    }

    bool wait_for_state_ok()
    {
        for (int i = 0; i < 1000; i++) {
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

    // Whether node 0 knows `n` host names (its own among them) within 5 s:
    // the others' come with their pings.
    bool names_reach_node_0(size_t n)
    {
        for (int i = 0; i < 500; i++) {
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

// (one test: a cluster takes a second to form)
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

// --- sentinels and roles

// A master, its replica and a sentinel that monitors the master.
TEST(Sentinel, AnswersAndRoles)
{
    TempDir     dir;
    RedisServer master, replica, sentinel;
    ASSERT_EQ(master.start(), "");
    ASSERT_EQ(replica.start(
                  {"--replicaof", "127.0.0.1", std::to_string(master.port())}),
              "");
    const std::string conf = dir.path() + "/sentinel.conf";
    ASSERT_TRUE(std::ofstream(conf).good());
    ASSERT_EQ(sentinel.start({conf, "--sentinel"}), "");
    Reply r = command(sentinel.context(),
                      {"SENTINEL", "MONITOR", "throttle", "127.0.0.1",
                       std::to_string(master.port()), "1"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS)
        << (r ? std::string(r->str, r->len) : "no reply");

    r = ask(sentinel.port(),
            {"SENTINEL", "get-master-addr-by-name", "throttle"});
    MasterAddress found = read_master_address(r.get());
    EXPECT_EQ(found.status, MasterAddress::Status::found);
    EXPECT_EQ(found.address.host, "127.0.0.1");
    EXPECT_EQ(found.address.port, static_cast<unsigned>(master.port()));

    r = ask(sentinel.port(), {"SENTINEL", "get-master-addr-by-name", "other"});
    EXPECT_EQ(read_master_address(r.get()).status,
              MasterAddress::Status::unknown);
    // an error: a sentinel's answer to a command it does not have
    r = ask(sentinel.port(), {"GET", "k"});
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
    EXPECT_EQ(read_master_address(r.get()).status, MasterAddress::Status::bad);

    EXPECT_TRUE(role_is_master(ask(master.port(), {"ROLE"}).get()));
    EXPECT_FALSE(role_is_master(ask(replica.port(), {"ROLE"}).get()));
    EXPECT_FALSE(role_is_master(ask(sentinel.port(), {"ROLE"}).get()));
    // a sentinel's answer is no role
    EXPECT_FALSE(
        role_is_master(ask(sentinel.port(),
                           {"SENTINEL", "get-master-addr-by-name", "throttle"})
                           .get()));
    sentinel.stop();
    replica.stop();
    master.stop();
}

TEST(Sentinel, MalformedAnswers)
{
    const char *bad[] = {
        "+OK\r\n",
        ":6379\r\n",
        "-ERR no such command\r\n",
        "*0\r\n",
        "*1\r\n$9\r\n127.0.0.1\r\n",
        "*3\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n$1\r\nx\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n:6379\r\n",       // an integer port
        "*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n",     // port 0
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n", // beyond 65535
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n-6379\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n 6379\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$0\r\n\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$21\r\n999999999999999996379\r\n",
        "*2\r\n$0\r\n\r\n$4\r\n6379\r\n", // no host
        "*2\r\n$-1\r\n$4\r\n6379\r\n",
        "*2\r\n*0\r\n$4\r\n6379\r\n",
    };
    for (const char *resp : bad) {
        Reply r = read_reply(resp);
        ASSERT_TRUE(r) << resp;
        EXPECT_EQ(read_master_address(r.get()).status,
                  MasterAddress::Status::bad)
            << resp;
    }
    EXPECT_EQ(read_master_address(nullptr).status, MasterAddress::Status::bad);
    // a port of leading zeros is still a port; the host is any bytes
    Reply r =
        read_reply(std::string("*2\r\n$5\r\n::1\0x\r\n$5\r\n06380\r\n", 26));
    MasterAddress a = read_master_address(r.get());
    EXPECT_EQ(a.status, MasterAddress::Status::found);
    EXPECT_EQ(a.address.host, std::string_view("::1\0x", 5));
    EXPECT_EQ(a.address.port, 6380u);
}

TEST(Role, MalformedRoles)
{
    for (const char *resp : {
             "+master\r\n",
             "$6\r\nmaster\r\n",
             "*0\r\n",
             "*1\r\n+master\r\n", // a status, not a bulk string
             "*1\r\n$7\r\nmasters\r\n",
             "*1\r\n$5\r\nmaste\r\n",
             "*1\r\n$6\r\nMASTER\r\n",
             "*1\r\n*1\r\n$6\r\nmaster\r\n",
             "-ERR unknown command 'ROLE'\r\n",
         })
    {
        Reply r = read_reply(resp);
        ASSERT_TRUE(r) << resp;
        EXPECT_FALSE(role_is_master(r.get())) << resp;
    }
    EXPECT_FALSE(role_is_master(nullptr));
    EXPECT_TRUE(role_is_master(read_reply("*1\r\n$6\r\nmaster\r\n").get()));
}

// A message as a sentinel publishes it on "+switch-master".
std::string
switch_message(std::string_view channel, std::string_view text)
{
    std::string resp = "*3\r\n$7\r\nmessage\r\n";
    resp += "$" + std::to_string(channel.size()) + "\r\n";
    resp += channel;
    resp += "\r\n$" + std::to_string(text.size()) + "\r\n";
    resp += text;
    return resp + "\r\n";
}

// What read_switch_master() makes of a message: "found host:port",
// "unknown" or "bad".
std::string
switch_news(const std::string &resp, std::string_view master)
{
    // the address points into the reply: it must outlive the reading
    const Reply         reply = resp.empty() ? Reply{} : read_reply(resp);
    const MasterAddress news = read_switch_master(reply.get(), master);
    switch (news.status) {
    case MasterAddress::Status::found:
        return "found " + std::string(news.address.host) + ":"
            + std::to_string(news.address.port);
    case MasterAddress::Status::unknown:
        return "unknown";
    default:
        return "bad";
    }
}

TEST(Sentinel, SwitchMasterMessages)
{
    const std::string moved = "mm 127.0.0.1 7201 127.0.0.2 7202";

    EXPECT_EQ(switch_news(switch_message("+switch-master", moved), "mm"),
              "found 127.0.0.2:7202");
    // another master, one whose name starts alike, another channel
    EXPECT_EQ(switch_news(switch_message("+switch-master", moved), "other"),
              "unknown");
    EXPECT_EQ(switch_news(switch_message("+switch-master", moved), "m"),
              "unknown");
    EXPECT_EQ(switch_news(switch_message("+sdown", moved), "mm"), "unknown");
    // this master, but no new address that can be used
    for (const char *text :
         {"mm", "mm 127.0.0.1 7201", "mm 127.0.0.1 7201 127.0.0.2",
          "mm 127.0.0.1 7201  7202", "mm 127.0.0.1 7201 127.0.0.2 0",
          "mm 127.0.0.1 7201 127.0.0.2 65536", "mm 127.0.0.1 7201 h 72x2",
          "mm 127.0.0.1 7201 127.0.0.2 7202 extra"})
    {
        EXPECT_EQ(switch_news(switch_message("+switch-master", text), "mm"),
                  "bad")
            << text;
    }
    // SUBSCRIBE's own answer, and no message at all
    EXPECT_EQ(switch_news("*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n"
                          ":1\r\n",
                          "mm"),
              "unknown");
    EXPECT_EQ(switch_news("", "mm"), "unknown");
}

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
