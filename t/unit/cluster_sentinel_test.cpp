// SPDX-License-Identifier: BSD-2-Clause
// Redis Sentinel and roles: a real sentinel's answers and real servers'
// ROLE, each read from the bytes the server sent; then answers, roles and
// +switch-master messages no server sends.
#include "cluster_support.hpp"
#include "redis_fixture.hpp"
#include "throttle/cluster.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <string_view>

namespace throttle {
namespace {

using testing_support::ask;
using testing_support::command;
using testing_support::read_reply;
using testing_support::RedisServer;
using testing_support::Reply;
using testing_support::TempDir;

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

} // namespace
} // namespace throttle
