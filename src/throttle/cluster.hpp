// SPDX-License-Identifier: BSD-2-Clause
// What the core knows of Redis Cluster and Sentinel: which slot a key
// lives in, and how the replies that steer the transport are read (the slot
// map, redirections, a sentinel's answer, a server's role). The transport
// itself (nodes, connections, timers) is glue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

struct redisReply;

namespace throttle {

constexpr unsigned kClusterSlots = 16384;

// The slot of a key name, as Redis Cluster computes it: CRC16 (XMODEM) of
// the hash tag (the bytes between the first "{" and the next "}", when
// there are any) or of the whole name, modulo kClusterSlots.
unsigned key_slot(std::string_view name) noexcept;

// An address as a reply gives it. "host" points into the reply, or is the
// answering node's host the reader was given (below).
struct NodeAddress {
    std::string_view host;
    unsigned         port = 0;
};

// Slots [first, last] and the master that serves them.
struct SlotRange {
    unsigned    first = 0;
    unsigned    last = 0;
    NodeAddress master;
    // The host name the master is announced by, which MOVED and ASK give,
    // when "master.host" is the ip beside it (below); else empty.
    std::string_view master_name;
};

// Called for each range of a slot map, in the reply's order; false stops
// the reading (and it then fails with "stopped").
using SlotRangeFn = bool (*)(void *data, const SlotRange &range);

// A node's host, in a slot map, MOVED or ASK, has one meaning, which the
// readers apply before anything else sees it; the endpoint Redis gives
// decides. Redis documents a nil endpoint thus: "the client should connect
// to the same endpoint it used to send the CLUSTER SLOTS command but with
// the port returned from the command"; "" (a node that does not know its
// own address yet) is read the same. So nil and "" are `answering`, the
// host of the node that sent the reply (its address, as the caller gives
// it; not empty), at the port given. "?" (a node configured to announce a
// host name it lacks) is unknown: a map skips its ranges. Any other
// endpoint is where the node is, and a map that gives the node's "ip"
// beside it (Redis 7 does when the endpoint is a host name) has that ip as
// the host: the transport looks no name up. A master's host in a map is
// never empty or "?".

// Reads a CLUSTER SLOTS reply (an array of [first, last, [endpoint, port,
// id, metadata, ...], replicas...], the metadata a flat map with "ip")
// that the node at `answering` sent: null on success, else what was wrong
// (an error reply's text points into the reply). Ranges must be within
// the slots, first <= last, with an endpoint (a string or nil) and a port
// in 1..65535.
const char *read_cluster_slots(const redisReply *reply,
                               std::string_view answering, SlotRangeFn each,
                               void *data) noexcept;

// The same for CLUSTER SHARDS (Redis 7: an array of shards, each a flat
// map with "slots" (pairs of bounds) and "nodes" (flat maps with
// "endpoint" and "ip", "port" or "tls-port", "role" and "health")): each
// range of a shard goes to its master whose health is "online" (at its
// "endpoint", or its "ip" if it gives no endpoint; "tls-port" when `tls`
// and the node has one, else "port"). A shard with no online master is
// skipped.
const char *read_cluster_shards(const redisReply *reply,
                                std::string_view answering, SlotRangeFn each,
                                void *data, bool tls) noexcept;

// What an error reply tells the transport to do.
enum class ErrorKind {
    other,       // an error of the command itself
    noscript,    // NOSCRIPT: send the script's source
    moved,       // MOVED slot host:port: the slot lives there now
    ask,         // ASK slot host:port: ASKING, then there, this time only
    tryagain,    // TRYAGAIN: a slot in the middle of a move
    clusterdown, // CLUSTERDOWN
    readonly,    // READONLY: a replica (a master demoted by a failover)
    loading,     // LOADING: a server still loading its data
    masterdown,  // MASTERDOWN: a replica that lost its master
};

struct ErrorReply {
    ErrorKind   kind = ErrorKind::other;
    unsigned    slot = 0; // MOVED and ASK
    NodeAddress target;   // MOVED and ASK
};

// Reads an error reply's text ("MOVED 3999 127.0.0.1:6381") that the node
// at `answering` sent. A MOVED or ASK whose slot or address does not parse
// is ErrorKind::other. An empty host ("MOVED 3999 :6380") is `answering`,
// as in a slot map; "?" stays, a node the transport cannot find.
ErrorReply read_error(std::string_view text,
                      std::string_view answering) noexcept;

// A sentinel's answer to SENTINEL get-master-addr-by-name.
struct MasterAddress {
    enum class Status {
        found,   // "address" is the master's
        unknown, // nil: the sentinel does not know the master's name
        bad,     // an error, or not a [host, port] array (with a host,
                 // and a port in 1..65535)
    };
    Status      status = Status::bad;
    NodeAddress address;
};

MasterAddress read_master_address(const redisReply *reply) noexcept;

// What a message a sentinel published on "+switch-master" ([message,
// +switch-master, "<name> <old host> <old port> <new host> <new port>"])
// says of the master called `master`: found, with its new address; unknown
// if the message is of another master (or no such message); bad if it
// names this master but not a new host and a port in 1..65535. The sentinel
// that publishes it has switched already: the address needs no question.
MasterAddress read_switch_master(const redisReply *reply,
                                 std::string_view  master) noexcept;

// Whether a ROLE reply says "master".
bool role_is_master(const redisReply *reply) noexcept;

} // namespace throttle
