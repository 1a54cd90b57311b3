-- SPDX-License-Identifier: BSD-2-Clause
-- wrk script of scripts/chaos/run.sh and scripts/soak/run.sh: requests
-- cycle over a list of locations, and every answer is counted by what it
-- was and when it was asked.
--
--   wrk ... -s scripts/lib/load.lua http://127.0.0.1:PORT -- \
--       EPOCH_FILE OUT KEYS /loc1,/loc2,...
--
-- Keys (?k=): with KEYS a number N, each location gets N keys in turn, so
-- that its limit bites; with KEYS "distinct", each location gets every key
-- twice in a row and never again (thread number, then a counter). A
-- location named /count (/count, /cluster/count...) gets "<epoch>.<i>"
-- instead, over 8 keys: the chaos run reads from Redis what that zone
-- synced for each epoch.
--
-- EPOCH_FILE holds the epoch, a word rewritten by the script that runs wrk
-- (chaos: "<phase>.<when>", e.g. "stall.fault"; soak: the sample);
-- each thread reads it again every 64 requests. Every request carries it
-- as ?e=, which nginx sends back in X-Epoch (and the location in X-Path,
-- the decision in X-Throttle), so an answer counts in the epoch its request
-- was sent in.
--
-- At the end OUT gets one line per kind of answer, "<epoch> <location>
-- <status> <X-Throttle> <number>", then a line "summary" with wrk's
-- figures: requests, microseconds, socket errors (connect, read, write,
-- timeout) and the slowest answer in microseconds.

local COUNT_KEYS = 8

local locations, hot
local epoch = "start"
local sent = 0
local threads = {}
-- globals: wrk copies them between its Lua states (thread:get(), set())
counts = {}
epoch_file, out_file, id = nil, nil, nil

function setup(thread)
    thread:set("id", #threads)
    table.insert(threads, thread)
end

local function read_epoch()
    local f = io.open(epoch_file)
    if f then
        local e = f:read("*l")
        f:close()
        if e and e ~= "" then
            epoch = e
        end
    end
end

function init(args)
    epoch_file, out_file = args[1], args[2]
    hot = args[3] ~= "distinct" and tonumber(args[3] or "")
    locations = {}
    for loc in (args[4] or ""):gmatch("[^,]+") do
        table.insert(locations, loc)
    end
    if out_file == nil or (hot == nil and args[3] ~= "distinct") or #locations == 0 then
        error("load.lua: give EPOCH_FILE OUT KEYS LOCATIONS after --")
    end
    read_epoch()
end

function request()
    if sent % 64 == 0 then
        read_epoch()
    end
    local location = locations[sent % #locations + 1]
    local round = math.floor(sent / #locations)
    sent = sent + 1
    local key
    if location:match("/count$") then
        key = epoch .. "." .. (round % COUNT_KEYS)
    elseif hot then
        key = tostring(round % hot)
    else
        key = id .. "-" .. math.floor(round / 2)
    end
    return wrk.format(nil, location .. "?k=" .. key .. "&e=" .. epoch)
end

function response(status, headers, body)
    local kind = (headers["X-Epoch"] or "-") .. " " .. (headers["X-Path"] or "-")
        .. " " .. status .. " " .. (headers["X-Throttle"] or "-")
    counts[kind] = (counts[kind] or 0) + 1
end

-- runs in wrk's main Lua state, where init() did not: OUT comes from a
-- thread's
function done(summary, latency, requests)
    local total = {}
    local out = threads[1]:get("out_file")
    for _, thread in ipairs(threads) do
        for kind, n in pairs(thread:get("counts")) do
            total[kind] = (total[kind] or 0) + n
        end
    end
    local f = assert(io.open(out, "w"))
    for kind, n in pairs(total) do
        f:write(kind, " ", n, "\n")
    end
    local e = summary.errors
    f:write(string.format("summary %d %d %d %d %d %d %d\n", summary.requests,
        summary.duration, e.connect, e.read, e.write, e.timeout, latency.max))
    f:close()
end
