// The Lua scripts run in Redis (src/scripts/*.lua), embedded at build time
// with their SHA1, so EVALSHA needs no SCRIPT LOAD round trip to learn it.
#pragma once

#include <string_view>

namespace throttle {

// In the order of THROTTLE_SCRIPTS in CMakeLists.txt.
enum class ScriptId {
    gcra,
    gcra_refund,
    gcra_sync,
    fixed_window,
    fixed_window_refund,
    sliding_window,
    sliding_window_refund,
    sliding_log,
    sliding_log_refund,
    fixed_window_sync,
    sliding_window_sync,
};

struct Script {
    std::string_view name;
    std::string_view source;
    std::string_view sha1; // 40 lowercase hex digits
};

const Script &script(ScriptId id) noexcept;

} // namespace throttle
