-- Helpers for specs that compile a C host against the static library ($LANTERN_BUILD/liblantern.a)
-- the way a user does (cc host.c liblantern.a -llua5.4 <Makefile's LDLIBS>) and run it with no
-- Lua files reachable, so `require "lantern"` must come from the library itself.
local M = {}

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local s = p:read("a")
  p:close()
  return s
end

local function shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.shq = shq

local function readfile(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

M.root = sh("pwd"):gsub("%s+$", "")
M.build_dir = os.getenv("LANTERN_BUILD") or "build"

function M.abspath(p) return M.root .. "/" .. p end

function M.lib() return M.abspath(M.build_dir .. "/liblantern.a") end

-- The libraries the Makefile links the core with (OpenBLAS, zlib, OpenMP, ...).
function M.ldlibs()
  for line in io.lines(M.abspath("Makefile")) do
    local v = line:match("^LDLIBS%s*:?=%s*(.-)%s*$")
    if v then return v end
  end
  return "-lopenblas -lz -lm -lpthread"
end

-- An AddressSanitizer build of the library needs the host linked the same way.
function M.sanitized()
  if M._san == nil then
    M._san = sh("nm " .. shq(M.lib()) .. " 2>/dev/null | grep -c __asan_report"):match("^0") == nil
  end
  return M._san
end

-- Compiles `src` (relative to the repository root) into a temporary executable; returns its path.
function M.build(src, extra_flags)
  local lib = M.lib()
  assert(io.open(lib, "rb"), lib .. " is missing: run `make BUILD=" .. M.build_dir .. "` first"):close()
  local exe = os.tmpname()
  local san = M.sanitized() and "-fsanitize=address,undefined -fno-omit-frame-pointer" or ""
  local cmd = string.format(
    "env -u LD_PRELOAD cc -std=c11 -O2 -g -Wall -Wextra -Werror %s -I%s -I/usr/include/lua5.4 %s %s %s -llua5.4 %s -o %s 2>&1",
    san, shq(M.abspath("include")), shq(M.abspath(src)), extra_flags or "", shq(lib), M.ldlibs(), shq(exe))
  local p = assert(io.popen(cmd))
  local log = p:read("a")
  local ok = p:close()
  assert(ok, "compiling " .. src .. " failed:\n" .. cmd .. "\n" .. log)
  return exe
end

-- Runs exe with args from /tmp with no Lua module paths; returns stdout, stderr, exit code.
function M.run(exe, args, timeout)
  local quoted = {}
  for i, a in ipairs(args or {}) do quoted[i] = shq(a) end
  local out, err = os.tmpname(), os.tmpname()
  local cmd = string.format(
    "cd /tmp && LUA_PATH='/nonexistent/?.lua' LUA_CPATH='/nonexistent/?.so' LUA_INIT= timeout %d %s %s > %s 2> %s",
    timeout or 120, shq(exe), table.concat(quoted, " "), shq(out), shq(err))
  local ok, _, code = os.execute(cmd)
  local o, e = readfile(out), readfile(err)
  os.remove(out)
  os.remove(err)
  return o, e, ok and 0 or code
end

return M
