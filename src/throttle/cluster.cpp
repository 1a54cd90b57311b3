// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/cluster.hpp"

#include "throttle/crc16.hpp"

#include <hiredis/hiredis.h>

namespace throttle {

namespace {

constexpr unsigned kMaxPort = 65535;

std::string_view
text_of(const redisReply *reply) noexcept
{
    return {reply->str, reply->len};
}

bool
is_string(const redisReply *reply) noexcept
{
    return reply != nullptr && reply->type == REDIS_REPLY_STRING;
}

// An integer reply in [low, high].
bool
read_integer(const redisReply *reply, unsigned low, unsigned high,
             unsigned &value) noexcept
{
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER
        || reply->integer < static_cast<long long>(low)
        || reply->integer > static_cast<long long>(high))
    {
        return false;
    }
    value = static_cast<unsigned>(reply->integer);
    return true;
}

// Decimal digits only (no sign, no space) of a number in [low, high]; the
// bound is checked at each digit, so no number of digits overflows.
bool
read_decimal(std::string_view digits, unsigned low, unsigned high,
             unsigned &value) noexcept
{
    if (digits.empty()) {
        return false;
    }
    unsigned v = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') {
            return false;
        }
        v = v * 10 + static_cast<unsigned>(c - '0');
        if (v > high) {
            return false;
        }
    }
    value = v;
    return v >= low;
}

// "?": a node configured to announce a host name it lacks.
bool
is_unknown(std::string_view host) noexcept
{
    return host == "?";
}

// A host as cluster.hpp reads it: `answering` in the place of an empty
// one (nil reads as empty).
std::string_view
place_host(std::string_view host, std::string_view answering) noexcept
{
    return host.empty() ? answering : host;
}

// What an endpoint may be: a string, or nil.
bool
is_endpoint(const redisReply *reply) noexcept
{
    return is_string(reply)
        || (reply != nullptr && reply->type == REDIS_REPLY_NIL);
}

// Where a master of a slot map is, from its endpoint and the "ip" the reply
// gives beside it (null if none), as cluster.hpp says: false if no one
// knows ("?").
bool
locate_master(const redisReply *endpoint, const redisReply *ip,
              std::string_view answering, SlotRange &range) noexcept
{
    std::string_view host = text_of(endpoint);
    if (is_unknown(host)) {
        return false;
    }
    if (!host.empty() && is_string(ip) && ip->len != 0
        && !is_unknown(text_of(ip)) && text_of(ip) != host)
    {
        range.master_name = host;
        host = text_of(ip);
    }
    range.master.host = place_host(host, answering);
    return true;
}

const char *
read_bounds(const redisReply *first, const redisReply *last,
            SlotRange &range) noexcept
{
    if (!read_integer(first, 0, kClusterSlots - 1, range.first)
        || !read_integer(last, 0, kClusterSlots - 1, range.last))
    {
        return "unexpected slot map: a slot is not an integer in 0..16383";
    }
    if (range.first > range.last) {
        return "unexpected slot map: a range ends before it starts";
    }
    return nullptr;
}

// A RESP2 map: an array of names (strings) and values.
bool
is_flat_map(const redisReply *reply) noexcept
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0) {
        return false;
    }
    for (size_t i = 0; i < reply->elements; i += 2) {
        if (!is_string(reply->element[i])) {
            return false;
        }
    }
    return true;
}

// The value of the first `name` in a flat map, or null.
const redisReply *
field(const redisReply *map, std::string_view name) noexcept
{
    for (size_t i = 0; i < map->elements; i += 2) {
        if (text_of(map->element[i]) == name) {
            return map->element[i + 1];
        }
    }
    return nullptr;
}

bool
field_is(const redisReply *map, std::string_view name,
         std::string_view value) noexcept
{
    const redisReply *v = field(map, name);
    return is_string(v) && text_of(v) == value;
}

// One entry of CLUSTER SLOTS: [first, last, [endpoint, port, id,
// metadata, ...], replicas...], where the metadata (Redis 7) is a flat map
// with the "ip" when the endpoint is not it.
const char *
read_slots_entry(const redisReply *entry, std::string_view answering,
                 SlotRangeFn each, void *data) noexcept
{
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 3) {
        return "unexpected reply to CLUSTER SLOTS: an entry is not "
               "[first, last, master, ...]";
    }
    SlotRange range;
    if (const char *why =
            read_bounds(entry->element[0], entry->element[1], range)) {
        return why;
    }

    const redisReply *master = entry->element[2];
    if (master->type != REDIS_REPLY_ARRAY || master->elements < 2) {
        return "unexpected reply to CLUSTER SLOTS: a master is not "
               "[host, port, ...]";
    }
    if (!is_endpoint(master->element[0])) {
        return "unexpected reply to CLUSTER SLOTS: a host is not a string";
    }
    if (!read_integer(master->element[1], 1, kMaxPort, range.master.port)) {
        return "unexpected reply to CLUSTER SLOTS: a port is not in "
               "1..65535";
    }
    const redisReply *metadata =
        master->elements >= 4 ? master->element[3] : nullptr;
    const redisReply *ip = metadata != nullptr && is_flat_map(metadata)
        ? field(metadata, "ip")
        : nullptr;
    if (!locate_master(master->element[0], ip, answering, range)) {
        return nullptr;
    }
    return each(data, range) ? nullptr : "stopped";
}

// The master of a shard's nodes whose health is "online", or null (a
// shard whose master failed and has no replica promoted yet).
const char *
find_online_master(const redisReply *nodes, const redisReply *&master) noexcept
{
    master = nullptr;
    if (nodes == nullptr || nodes->type != REDIS_REPLY_ARRAY) {
        return "unexpected reply to CLUSTER SHARDS: a shard's nodes are not "
               "an array";
    }
    for (size_t i = 0; i < nodes->elements; i++) {
        const redisReply *node = nodes->element[i];
        if (!is_flat_map(node) || !is_string(field(node, "role"))
            || !is_string(field(node, "health")))
        {
            return "unexpected reply to CLUSTER SHARDS: a node is not a map "
                   "with a role and a health";
        }
        if (master == nullptr && field_is(node, "role", "master")
            && field_is(node, "health", "online"))
        {
            master = node;
        }
    }
    return nullptr;
}

// A node's endpoint ("endpoint", else, for a node that gives none, "ip"),
// the "ip" beside it, and its port ("tls-port" over TLS when it has one,
// else "port").
const char *
read_node_address(const redisReply *node, bool tls, const redisReply *&endpoint,
                  const redisReply *&ip, unsigned &port) noexcept
{
    ip = field(node, "ip");
    endpoint = field(node, "endpoint");
    if (endpoint == nullptr) {
        endpoint = ip;
    }
    if (!is_endpoint(endpoint)) {
        return "unexpected reply to CLUSTER SHARDS: a master has no ip or "
               "endpoint";
    }
    const redisReply *number = tls ? field(node, "tls-port") : nullptr;
    if (number == nullptr) {
        number = field(node, "port");
    }
    if (!read_integer(number, 1, kMaxPort, port)) {
        return "unexpected reply to CLUSTER SHARDS: a master's port is not "
               "in 1..65535";
    }
    return nullptr;
}

// One shard of CLUSTER SHARDS: ["slots", [first, last, ...], "nodes",
// [node...]]. Its ranges go to its online master, if it has one with a
// known endpoint.
const char *
read_shard(const redisReply *shard, std::string_view answering, bool tls,
           SlotRangeFn each, void *data) noexcept
{
    if (!is_flat_map(shard)) {
        return "unexpected reply to CLUSTER SHARDS: a shard is not a map";
    }
    const redisReply *slots = field(shard, "slots");
    if (slots == nullptr || slots->type != REDIS_REPLY_ARRAY
        || slots->elements % 2 != 0)
    {
        return "unexpected reply to CLUSTER SHARDS: a shard's slots are not "
               "pairs of bounds";
    }
    const redisReply *master;
    if (const char *why = find_online_master(field(shard, "nodes"), master)) {
        return why;
    }

    SlotRange range;
    bool      served = false;
    if (master != nullptr) {
        const redisReply *endpoint, *ip;
        if (const char *why =
                read_node_address(master, tls, endpoint, ip, range.master.port))
        {
            return why;
        }
        served = locate_master(endpoint, ip, answering, range);
    }

    for (size_t i = 0; i < slots->elements; i += 2) {
        if (const char *why =
                read_bounds(slots->element[i], slots->element[i + 1], range))
        {
            return why;
        }
        if (served && !each(data, range)) {
            return "stopped";
        }
    }
    return nullptr;
}

// The part of a reply both slot maps start with: null (go on) if it is an
// array, else why not.
const char *
read_map_reply(const redisReply *reply, const char *not_an_array) noexcept
{
    if (reply == nullptr) {
        return "no reply";
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        return reply->str;
    }
    return reply->type == REDIS_REPLY_ARRAY ? nullptr : not_an_array;
}

// "<slot> <host>:<port>", the rest of a MOVED or ASK; the port follows the
// last colon (an IPv6 host has colons of its own).
bool
read_redirection(std::string_view rest, std::string_view answering,
                 ErrorReply &error) noexcept
{
    const size_t space = rest.find(' ');
    if (space == std::string_view::npos) {
        return false;
    }
    const std::string_view address = rest.substr(space + 1);
    const size_t           colon = address.rfind(':');
    if (colon == std::string_view::npos
        || address.find(' ') != std::string_view::npos)
    {
        return false;
    }
    error.target.host = place_host(address.substr(0, colon), answering);
    return read_decimal(rest.substr(0, space), 0, kClusterSlots - 1, error.slot)
        && read_decimal(address.substr(colon + 1), 1, kMaxPort,
                        error.target.port);
}

struct ErrorWord {
    std::string_view word;
    ErrorKind        kind;
};

constexpr ErrorWord kErrorWords[] = {
    {"NOSCRIPT", ErrorKind::noscript},
    {"MOVED", ErrorKind::moved},
    {"ASK", ErrorKind::ask},
    {"TRYAGAIN", ErrorKind::tryagain},
    {"CLUSTERDOWN", ErrorKind::clusterdown},
    {"READONLY", ErrorKind::readonly},
    {"LOADING", ErrorKind::loading},
    {"MASTERDOWN", ErrorKind::masterdown},
};

} // namespace

unsigned
key_slot(std::string_view name) noexcept
{
    const size_t open = name.find('{');
    if (open != std::string_view::npos) {
        const size_t close = name.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) {
            name = name.substr(open + 1, close - open - 1);
        }
    }
    return crc16(reinterpret_cast<const unsigned char *>(name.data()),
                 name.size())
        % kClusterSlots;
}

const char *
read_cluster_slots(const redisReply *reply, std::string_view answering,
                   SlotRangeFn each, void *data) noexcept
{
    if (const char *why = read_map_reply(
            reply, "unexpected reply to CLUSTER SLOTS: not an array"))
    {
        return why;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        if (const char *why =
                read_slots_entry(reply->element[i], answering, each, data))
        {
            return why;
        }
    }
    return nullptr;
}

const char *
read_cluster_shards(const redisReply *reply, std::string_view answering,
                    SlotRangeFn each, void *data, bool tls) noexcept
{
    if (const char *why = read_map_reply(
            reply, "unexpected reply to CLUSTER SHARDS: not an array"))
    {
        return why;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        if (const char *why =
                read_shard(reply->element[i], answering, tls, each, data)) {
            return why;
        }
    }
    return nullptr;
}

ErrorReply
read_error(std::string_view text, std::string_view answering) noexcept
{
    const std::string_view word = text.substr(0, text.find(' '));
    ErrorReply             error;
    for (const ErrorWord &known : kErrorWords) {
        if (word == known.word) {
            error.kind = known.kind;
        }
    }
    const bool redirection =
        error.kind == ErrorKind::moved || error.kind == ErrorKind::ask;
    if (redirection
        && (word.size() == text.size()
            || !read_redirection(text.substr(word.size() + 1), answering,
                                 error)))
    {
        return ErrorReply{};
    }
    return error;
}

MasterAddress
read_master_address(const redisReply *reply) noexcept
{
    MasterAddress answer;
    if (reply != nullptr && reply->type == REDIS_REPLY_NIL) {
        answer.status = MasterAddress::Status::unknown;
        return answer;
    }
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 2 || !is_string(reply->element[0])
        || reply->element[0]->len == 0 || !is_string(reply->element[1])
        || !read_decimal(text_of(reply->element[1]), 1, kMaxPort,
                         answer.address.port))
    {
        return MasterAddress{};
    }
    answer.status = MasterAddress::Status::found;
    answer.address.host = text_of(reply->element[0]);
    return answer;
}

bool
role_is_master(const redisReply *reply) noexcept
{
    return reply != nullptr && reply->type == REDIS_REPLY_ARRAY
        && reply->elements >= 1 && is_string(reply->element[0])
        && text_of(reply->element[0]) == "master";
}

MasterAddress
read_switch_master(const redisReply *reply, std::string_view master) noexcept
{
    MasterAddress answer;
    answer.status = MasterAddress::Status::unknown;
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 3 || !is_string(reply->element[0])
        || !is_string(reply->element[1]) || !is_string(reply->element[2])
        || text_of(reply->element[0]) != "message"
        || text_of(reply->element[1]) != "+switch-master")
    {
        return answer;
    }

    // name, old host, old port, new host, new port
    std::string_view text = text_of(reply->element[2]);
    std::string_view words[5];
    size_t           n = 0;
    while (n < 5 && !text.empty()) {
        const size_t space = text.find(' ');
        words[n++] = text.substr(0, space);
        text = space == std::string_view::npos ? std::string_view{}
                                               : text.substr(space + 1);
    }
    if (n == 0 || words[0] != master) {
        return answer;
    }
    if (n < 5 || !text.empty() || words[3].empty()
        || !read_decimal(words[4], 1, kMaxPort, answer.address.port))
    {
        return MasterAddress{};
    }
    answer.status = MasterAddress::Status::found;
    answer.address.host = words[3];
    return answer;
}

} // namespace throttle
