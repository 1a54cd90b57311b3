// SPDX-License-Identifier: BSD-2-Clause
// Resetting a key (throttle_api's DELETE, docs/api.md): what each mode
// keeps of it in the zone, and the script that deletes its state in
// Redis. The rules are per mode, never per algorithm: every algorithm
// keeps a key as one name in Redis, and a zone's slot in the same words.
#include "throttle/lua.hpp"
#include "throttle/policy.hpp"

namespace throttle {

bool
Policy::reset(StoredKey &key, int64_t now, int64_t answered_by) const noexcept
{
    if (mode != Mode::strict) {
        return false;
    }

    // Redis decides a strict key; the zone only remembers its answers, and
    // must not remember those that tell of the key before the reset
    forget_answers(key, now, answered_by);
    return true;
}

ScriptCall
Policy::reset_call() const noexcept
{
    if (mode == Mode::local) {
        return {nullptr, {}};
    }
    return {&lua::reset, {}};
}

HashTag
Policy::redis_hash_tag() const noexcept
{
    return mode == Mode::async ? HashTag::shard : HashTag::key;
}

} // namespace throttle
