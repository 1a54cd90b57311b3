// SPDX-License-Identifier: BSD-2-Clause
// The Lua scripts run in Redis (src/scripts/*.lua), embedded at build time
// with their SHA1, so EVALSHA needs no SCRIPT LOAD round trip to learn it.
// Each is its file after src/scripts/lib/prelude.lua, which holds what they
// share. The generated header "throttle/lua.hpp" declares one Script per
// file, by the file's name: throttle::lua::gcra for gcra.lua.
#pragma once

#include <string_view>

namespace throttle {

struct Script {
    std::string_view name;
    std::string_view source;
    std::string_view sha1; // 40 lowercase hex digits
};

} // namespace throttle
