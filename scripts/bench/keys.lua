-- SPDX-License-Identifier: BSD-2-Clause
-- wrk script for the keyed rows of scripts/bench/run.sh: every request
-- carries a key in its query string, "?k=<i>", with i cycling over 1..N in
-- order, so that N distinct keys are each sent once every N requests.
--
--   wrk ... -s scripts/bench/keys.lua http://127.0.0.1:PORT/location -- N
--
-- The N requests are formatted once, in init(), so that sending one costs
-- wrk a table lookup (a few MB of memory for N = 100,000). Each wrk thread
-- cycles over all N keys, starting one key after the previous thread.

local requests = {}
local n = 0
local i = 0
local threads = 0

function setup(thread)
    thread:set("first", threads)
    threads = threads + 1
end

function init(args)
    n = tonumber(args[1] or "")
    if n == nil or n < 1 or n ~= math.floor(n) then
        error("keys.lua: give the number of keys after --, e.g. -- 100")
    end
    local path = wrk.path
    local sep = path:find("?", 1, true) and "&" or "?"
    for k = 1, n do
        requests[k] = wrk.format(nil, path .. sep .. "k=" .. k)
    end
    i = (first or 0) % n
end

function request()
    i = i % n + 1
    return requests[i]
end
