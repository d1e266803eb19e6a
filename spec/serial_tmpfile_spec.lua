-- The atomic writer behind lt.save, lt.safetensors.save and lt.save_module when the process
-- dies mid-save: children saving ~50 MB modules in a loop are killed with SIGKILL, and the
-- directory must hold only the targets, each a complete file from one of the saves. Both kinds
-- of temporary are covered: the unnamed O_TMPFILE one (Linux, the default) and the named
-- `path.tmp-PID-n` fallback, forced with LANTERN_NO_O_TMPFILE=1, whose leftovers the next save
-- of the same path removes when their PID no longer exists.
local lt = require "lantern"

local BIN = "bin/lantern"
local SIDE = 3600 -- Linear(SIDE, SIDE): 3600 * 3601 float32, about 52 MB a file
local FORMATS = { "pt", "safetensors" }
local DEAD = 2147483647 -- above any pid_max, so kill(DEAD, 0) fails with ESRCH

local support = require "support"
local shq = support.shq
local readfile = support.readfile
local writefile = support.writefile

local function sh(cmd)
  local ok = os.execute(cmd)
  assert(ok, "command failed: " .. cmd)
end

local function listdir(dir)
  local p = assert(io.popen("ls -A " .. shq(dir)))
  local names = {}
  for name in p:lines() do names[#names + 1] = name end
  p:close()
  table.sort(names)
  return names
end

local function mkdtemp()
  local p = assert(io.popen("mktemp -d"))
  local d = p:read("l")
  p:close()
  assert(d and d ~= "", "mktemp -d failed")
  return d
end

-- Each iteration fills the module with a value of its own and saves it in both formats,
-- logging every save that returned; a SIGKILL lands somewhere in this loop.
local CHILD = [[
local lt = require "lantern"
local dir, logf, child = arg[1], arg[2], tonumber(arg[3])
local m = lt.nn.Linear(%d, %d)
local i = 0
while true do
  i = i + 1
  local v = child * 1000 + i
  lt.no_grad(function() m.weight:fill_(v); m.bias:fill_(v) end)
  for _, f in ipairs { "pt", "safetensors" } do
    lt.save_module(m, dir .. "/m." .. f)
    local h = assert(io.open(logf, "a"))
    h:write(f, " ", v, "\n")
    h:close()
  end
end
]]

-- Starts child number `child` saving into dir, waits for its first completed save, then (when
-- `watch`) for a named temporary to show up in dir, sleeps a random moment and kills it.
-- Returns the saves it logged, in order, and whether a temporary was seen.
local function run_and_kill(work, dir, child, env, watch)
  local logf = work .. "/log" .. child
  local seen = work .. "/seen" .. child
  local script = table.concat({
    env .. " " .. BIN .. " " .. shq(work .. "/child.lua") .. " " .. shq(dir) .. " " .. shq(logf) ..
      " " .. child .. " >/dev/null 2>" .. shq(work .. "/err" .. child) .. " & pid=$!",
    "n=0",
    "while [ ! -s " .. shq(logf) .. " ] && kill -0 $pid 2>/dev/null && [ $n -lt 3000 ]; do " ..
      "sleep 0.01; n=$((n+1)); done",
    watch and ("n=0; while [ $n -lt 300 ]; do if ls -A " .. shq(dir) .. " | grep -q '[.]tmp-'; " ..
      "then echo 1 > " .. shq(seen) .. "; break; fi; sleep 0.01; n=$((n+1)); done") or ":",
    string.format("sleep 0.%03d", math.random(0, 350)),
    "kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; exit 0",
  }, "\n")
  sh("sh -c " .. shq(script))
  local log = {}
  for line in (readfile(logf) or ""):gmatch("[^\n]+") do
    local f, v = line:match("^(%a+) (%d+)$")
    assert(f, "bad log line " .. line)
    log[#log + 1] = { f = f, v = tonumber(v) }
  end
  assert(#log > 0, "child " .. child .. " saved nothing; stderr: " ..
    tostring(readfile(work .. "/err" .. child)))
  return log, readfile(seen) ~= nil
end

-- possible[f]: the values the target of format f may hold ("absent": never written). After a
-- child, a target holds its last logged save, or the save in flight when the kill came, which
-- may or may not have reached the rename.
local function update_possible(possible, log)
  local last = log[#log]
  local inflight = last.f == "pt" and { f = "safetensors", v = last.v } or
    { f = "pt", v = last.v + 1 }
  for _, f in ipairs(FORMATS) do
    local done
    for _, e in ipairs(log) do if e.f == f then done = e.v end end
    if inflight.f == f then
      if done then possible[f] = { [done] = true } end
      possible[f][inflight.v] = true
    elseif done then
      possible[f] = { [done] = true }
    end
  end
end

local function check_target(dir, f, possible)
  local path = dir .. "/m." .. f
  local m = lt.nn.Linear(SIDE, SIDE)
  if not readfile(path) then
    assert.is_true(possible[f].absent == true, path .. " is missing")
    return
  end
  lt.load_module(m, path)
  local v = m.weight:min():item()
  assert.equal(v, m.weight:max():item())
  assert.equal(v, m.bias:min():item())
  assert.equal(v, m.bias:max():item())
  assert.is_true(possible[f][v] == true, path .. " holds " .. v .. ", not a value saved last")
end

local function kill_loop(work, dir, env, n, first, watch)
  local possible = { pt = { absent = true }, safetensors = { absent = true } }
  local seen = false
  for child = first, first + n - 1 do
    local log, s = run_and_kill(work, dir, child, env, watch)
    seen = seen or s
    update_possible(possible, log)
  end
  return possible, seen
end

describe("serial: temporaries of killed saves", function()
  local work, dir
  before_each(function()
    math.randomseed(os.time())
    work = mkdtemp()
    dir = work .. "/out"
    sh("mkdir " .. shq(dir))
    writefile(work .. "/child.lua", string.format(CHILD, SIDE, SIDE))
  end)
  after_each(function() os.execute("rm -rf " .. shq(work)) end)

  it("leaves nothing but the targets when saves are killed (unnamed temporaries)", function()
    local possible = kill_loop(work, dir, "LANTERN_NO_O_TMPFILE=0", 6, 1, false)
    assert.same({ "m.pt", "m.safetensors" }, listdir(dir))
    for _, f in ipairs(FORMATS) do check_target(dir, f, possible) end
    -- the result's mode follows the umask, like any file the process creates
    writefile(dir .. "/plain", "")
    local p = assert(io.popen("stat -c %a " .. shq(dir .. "/m.pt") .. " " .. shq(dir .. "/plain")))
    local a, b = p:read("l"), p:read("l")
    p:close()
    assert.equal(b, a)
  end)

  it("removes named temporaries of dead processes on the next save (fallback)", function()
    local possible, seen = kill_loop(work, dir, "LANTERN_NO_O_TMPFILE=1", 4, 101, true)
    -- the variable did select the named kind: its temporaries were visible during saves
    assert.is_true(seen)
    for _, f in ipairs(FORMATS) do check_target(dir, f, possible) end
    -- leftovers of the killed children (each removed the previous ones), plus fakes
    local p = assert(io.popen("sh -c 'echo $$'"))
    local exited = assert(tonumber(p:read("l")))
    p:close()
    local stat = assert(readfile("/proc/self/stat"))
    local self = assert(tonumber(stat:match("^(%d+)")))
    local removed = {
      "m.pt.tmp-" .. DEAD .. "-0", "m.pt.tmp-" .. exited .. "-12",
      "m.safetensors.tmp-" .. DEAD .. "-3",
    }
    local kept = {
      "m.pt.tmp-1-0", "m.pt.tmp-" .. self .. "-0", -- live processes
      "m.pt.tmp-" .. DEAD .. "-0.bak", "m.pt.tmp-" .. DEAD .. "-", "m.pt.tmp-x-0",
      "m.pt.tmp--5-0", "m.pt.tmp-99999999999999999999-0", "m.pt.tmp-0-0",
      "other.pt.tmp-" .. DEAD .. "-0", "m.pt.tmp", "m.ptx.tmp-" .. DEAD .. "-0",
    }
    for _, name in ipairs(removed) do writefile(dir .. "/" .. name, "stale") end
    for _, name in ipairs(kept) do writefile(dir .. "/" .. name, "keep") end
    sh("LANTERN_NO_O_TMPFILE=1 " .. BIN .. " -e " .. shq(string.format([[
      local lt = require "lantern"
      local m = lt.nn.Linear(4, 4)
      lt.no_grad(function() m.weight:fill_(7); m.bias:fill_(7) end)
      lt.save_module(m, %q); lt.save_module(m, %q)
    ]], dir .. "/m.pt", dir .. "/m.safetensors")) .. " >/dev/null")
    local expect = { "m.pt", "m.safetensors" }
    for _, name in ipairs(kept) do expect[#expect + 1] = name end
    table.sort(expect)
    assert.same(expect, listdir(dir))
    for _, f in ipairs(FORMATS) do
      local m = lt.nn.Linear(4, 4)
      lt.load_module(m, dir .. "/m." .. f)
      assert.same({ 7, 7, 7, 7 }, m.bias:tolist())
    end
  end)

  it("removes them on a save with an unnamed temporary too", function()
    local path = dir .. "/m.pt"
    writefile(dir .. "/m.pt.tmp-" .. DEAD .. "-4", "stale")
    lt.save({ x = lt.tensor { 1, 2 } }, path)
    assert.same({ "m.pt" }, listdir(dir))
    writefile(dir .. "/m.pt.tmp-" .. DEAD .. "-5", "stale")
    lt.safetensors.save({ x = lt.tensor { 5 } }, path)
    assert.same({ "m.pt" }, listdir(dir))
    assert.same({ 5 }, lt.safetensors.load(path).x:tolist())
  end)

  it("keeps the old file and leaves no temporary when a write fails midway", function()
    for _, mode in ipairs { "0", "1" } do
      for _, f in ipairs(FORMATS) do
        local path = dir .. "/m." .. f
        lt.save_module(lt.nn.Linear(2, 3), path)
        local before = readfile(path)
        -- a 1 MB file size limit (SIGXFSZ ignored, so write fails with EFBIG) stops the
        -- 4 MB save partway through its data
        local p = assert(io.popen("sh -c " .. shq("trap '' XFSZ; ulimit -f 2048; " ..
          "LANTERN_NO_O_TMPFILE=" .. mode .. " " .. BIN .. " -e " .. shq(string.format(
            "local lt = require 'lantern'; print(select(2, pcall(lt.save_module, " ..
            "lt.nn.Linear(1000, 1000), %q)))", path))) .. " 2>&1"))
        local out = p:read("a")
        p:close()
        assert.truthy(out:find("write error", 1, true), out)
        assert.equal(before, readfile(path))
      end
      assert.same({ "m.pt", "m.safetensors" }, listdir(dir))
    end
  end)
end)
