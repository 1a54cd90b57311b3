// SPDX-License-Identifier: BSD-2-Clause
// What the Redis Cluster and Sentinel tests share: a reply read from RESP
// bytes by the reader the transport reads with, the bytes a server on
// loopback sends back for one command, and a directory of a test's own.
#pragma once

#include "redis_fixture.hpp"
#include "throttle/redis.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace throttle::testing_support {

// A reply read from RESP bytes by open_reply_reader(); null if the bytes
// are not one whole reply.
inline Reply
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

inline std::string
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
inline std::string
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

inline Reply
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

} // namespace throttle::testing_support
