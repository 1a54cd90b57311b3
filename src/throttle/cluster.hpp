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

// An address as a reply gives it. "host" points into the reply.
struct NodeAddress {
    std::string_view host;
    unsigned         port = 0;
};

// Slots [first, last] and the master that serves them.
struct SlotRange {
    unsigned    first = 0;
    unsigned    last = 0;
    NodeAddress master;
};

// Called for each range of a slot map, in the reply's order; false stops
// the reading (and it then fails with "stopped").
using SlotRangeFn = bool (*)(void *data, const SlotRange &range);

// Reads a CLUSTER SLOTS reply (an array of [first, last, [host, port, id,
// ...], replicas...]): null on success, else what was wrong (an error
// reply's text points into the reply). Ranges must be within the slots,
// first <= last, with a host and a port in 1..65535. A range whose master
// has an unknown endpoint (host "?") is skipped; an empty or nil host, which
// Redis gives for "the node you asked", is passed on empty.
const char *read_cluster_slots(const redisReply *reply, SlotRangeFn each,
                               void *data) noexcept;

// The same for CLUSTER SHARDS (Redis 7: an array of shards, each a flat
// map with "slots" (pairs of bounds) and "nodes" (flat maps with "ip" or
// "endpoint", "port" or "tls-port", "role" and "health")): each range of a
// shard goes to its master whose health is "online" ("ip" when the node
// has one, else "endpoint"; "tls-port" when `tls` and the node has one,
// else "port"). A shard with no online master, or one whose host is "?",
// is skipped; an empty host is passed on empty, as above.
const char *read_cluster_shards(const redisReply *reply, SlotRangeFn each,
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

// Reads an error reply's text ("MOVED 3999 127.0.0.1:6381"). A MOVED or
// ASK whose slot or address does not parse is ErrorKind::other. The
// address's host may be empty ("MOVED 3999 :6380": the node that answered).
ErrorReply read_error(std::string_view text) noexcept;

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
