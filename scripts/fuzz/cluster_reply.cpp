// SPDX-License-Identifier: BSD-2-Clause
// Redis Cluster and Sentinel replies: the bytes a node or a sentinel sends
// back, read as the transport reads them (its reader), then given to each
// reader of cluster.hpp as if it were the answer that reader waits for:
// CLUSTER SLOTS, CLUSTER SHARDS (over TCP and over TLS), SENTINEL
// get-master-addr-by-name, ROLE, a "+switch-master" message; an error
// reply's text, and a string
// reply's too, to read_error(). The whole input is Redis's bytes; the node
// that sent them is at kAnswering.
//
// Whatever the bytes, a reader answers without a crash and keeps its
// promises: a range it gives is within the slots, first <= last, its
// master's port in 1..65535 and its host neither empty nor "?", inside
// the reply or kAnswering itself, its name (if any) inside the reply and
// not its host; a sentinel's address, and a master's new one in a
// "+switch-master" message, is found only with a host inside the reply and
// a port; a redirection has a slot and a port in range, its host inside the
// text or kAnswering itself.
#include "support.hpp"

#include "throttle/cluster.hpp"

namespace throttle::fuzz {
namespace {

constexpr std::string_view kAnswering = "192.0.2.1";

// Whether `host` is kAnswering, not a copy of its text.
bool
is_answering(std::string_view host)
{
    return host.data() == kAnswering.data() && host == kAnswering;
}

// Whether `part` lies within the `len` bytes at `begin`.
bool
inside(std::string_view part, const char *begin, size_t len)
{
    return part.empty()
        || (part.data() >= begin && part.data() + part.size() <= begin + len);
}

// Whether `part` lies within one string of a reply.
bool
in_reply(std::string_view part, const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < reply->elements; i++) {
            if (in_reply(part, reply->element[i])) {
                return true;
            }
        }
        return false;
    }
    return reply->str != nullptr && inside(part, reply->str, reply->len);
}

struct MapCheck {
    const redisReply *reply;
    int               ranges = 0;
    bool              stopped = false;
};

bool
check_range(void *data, const SlotRange &range)
{
    auto *check = static_cast<MapCheck *>(data);
    expect(range.first <= range.last, "a range's first slot <= its last");
    expect(range.last < kClusterSlots, "a range is within the slots");
    expect(range.master.port >= 1 && range.master.port <= 65535,
           "a master's port is in 1..65535");
    expect(!range.master.host.empty() && range.master.host != "?",
           "a master's host is neither empty nor \"?\"");
    expect(is_answering(range.master.host)
               || in_reply(range.master.host, check->reply),
           "a master's host points into the reply or is the "
           "answering node's");
    expect(range.master_name.empty()
               || (in_reply(range.master_name, check->reply)
                   && range.master_name != range.master.host),
           "a master's name points into the reply, beside another host");
    // the callback may stop the reading: every 7th range does
    check->stopped = ++check->ranges % 7 == 0;
    return !check->stopped;
}

// A slot map read: stopped by the callback, it fails saying so.
void
check_map_read(const MapCheck &check, const char *why)
{
    if (check.stopped) {
        expect(why != nullptr && std::string_view(why) == "stopped",
               "a stopped reading fails with \"stopped\"");
    }
}

void
check_error_text(std::string_view text)
{
    const ErrorReply error = read_error(text, kAnswering);
    const bool       redirection =
        error.kind == ErrorKind::moved || error.kind == ErrorKind::ask;
    if (redirection) {
        expect(error.slot < kClusterSlots, "a redirection's slot is a slot");
        expect(error.target.port >= 1 && error.target.port <= 65535,
               "a redirection's port is in 1..65535");
        expect(!error.target.host.empty()
                   && (inside(error.target.host, text.data(), text.size())
                       || is_answering(error.target.host)),
               "a redirection's host points into the text or is the "
               "answering node's");
        expect(text.substr(0, error.kind == ErrorKind::moved ? 6 : 4)
                   == (error.kind == ErrorKind::moved ? "MOVED " : "ASK "),
               "a redirection's text starts with its word");
    } else {
        expect(error.slot == 0 && error.target.port == 0
                   && error.target.host.empty(),
               "only a redirection has a slot and a target");
    }
}

void
use_reply(const redisReply *reply)
{
    MapCheck slots{reply};
    check_map_read(slots,
                   read_cluster_slots(reply, kAnswering, check_range, &slots));
    for (bool tls : {false, true}) {
        MapCheck shards{reply};
        check_map_read(
            shards,
            read_cluster_shards(reply, kAnswering, check_range, &shards, tls));
    }

    const MasterAddress master = read_master_address(reply);
    if (master.status == MasterAddress::Status::found) {
        expect(!master.address.host.empty() && master.address.port >= 1
                   && master.address.port <= 65535,
               "a sentinel's master has a host and a port");
    }
    role_is_master(reply);

    const MasterAddress news = read_switch_master(reply, "mymaster");
    if (news.status == MasterAddress::Status::found) {
        expect(!news.address.host.empty() && in_reply(news.address.host, reply)
                   && news.address.port >= 1 && news.address.port <= 65535,
               "a switched master has a host inside the message and a port");
    }

    if (reply->type == REDIS_REPLY_ERROR || reply->type == REDIS_REPLY_STRING
        || reply->type == REDIS_REPLY_STATUS)
    {
        check_error_text({reply->str, reply->len});
    }
}

} // namespace

void
fuzz_one(std::string_view input)
{
    // the whole input as an error's text, as it may come
    check_error_text(input);
    read_replies(input, input.size() + 1, use_reply);
}

} // namespace throttle::fuzz
