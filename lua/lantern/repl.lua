--- The `lantern` command: an interactive session and a script runner, with `lua`'s options.
--
--    lantern                      interactive session (lt, nn, F, optim are bound)
--    lantern script.lua a b       runs script.lua with arg = {[0]="script.lua", "a", "b"}
--    lantern -e 'print(1)' -i     runs a statement, then the session
--
-- In the session an expression's value is printed (tensors and modules pretty-printed, tables
-- shown one level deep), `=expr` works too, an unfinished chunk continues on the next line,
-- and an error is shown with a short traceback without ending the session. Top-level `local`
-- definitions become globals of the session, so they survive from one input to the next.
-- `help(f)` or `?f` shows the reference text of a function, module or class; `:time` switches
-- a timer of each statement on and off. Ctrl-C at the prompt clears the line, and during an
-- evaluation interrupts it (any number of times). When standard input is a terminal and
-- Debian's `lua-readline` is installed, lines are edited with GNU readline, history persists
-- in `~/.lantern_history` (`LANTERN_HISTORY` overrides it, empty disables it) and Tab
-- completes globals and the fields and methods after `.` and `:`; without it, the terminal's
-- own line editing is used, with arrow keys and Tab dropped from the line.
-- `LANTERN_NO_READLINE=1` turns readline off.
-- @module lantern.repl
local M = {}

local PROGNAME = "lantern"
local VERSION = "0.1.0"

local stdout, stderr = io.stdout, io.stderr

-------------------------------------------------------------------------------- helpers

local function is_tty(fd)
  local ok, unistd = pcall(require, "posix.unistd")
  if ok and type(unistd) == "table" and unistd.isatty then
    return unistd.isatty(fd) == 1
  end
  local r = os.execute("test -t " .. fd)
  return r == true or r == 0
end

local function lantern_version()
  local lt = package.loaded["lantern"]
  return (type(lt) == "table" and rawget(lt, "__version")) or VERSION
end

local function version_line()
  return string.format("Lantern %s (%s)  tensors and autograd for Lua", lantern_version(),
    _VERSION)
end

local USAGE = [==[
usage: %s [options] [script [args]]
Available options are:
  -e stat   execute string 'stat'
  -i        enter interactive mode after executing 'script'
  -l mod    require library 'mod' into global 'mod'
  -l g=mod  require library 'mod' into global 'g'
  -v        show version information
  -W        turn warnings on
  --help    show this help
  --        stop handling options
  -         stop handling options and execute stdin
With no script and no -e or -v, starts an interactive session in which
lt = require "lantern" and nn, F, optim name lt.nn, lt.nn.functional, lt.optim.
]==]

local function usage(badopt, out)
  out = out or stderr
  if badopt then
    if badopt:sub(1, 2) == "-e" or badopt:sub(1, 2) == "-l" then
      out:write(string.format("%s: '%s' needs argument\n", PROGNAME, badopt))
    else
      out:write(string.format("%s: unrecognized option '%s'\n", PROGNAME, badopt))
    end
  end
  out:write(string.format(USAGE, PROGNAME))
  out:flush()
end

-- Text of an error object, as lua.c's msghandler makes it.
local function errtext(e)
  if type(e) == "string" then return e end
  local mt = getmetatable(e)
  if mt and mt.__tostring then
    local ok, s = pcall(tostring, e)
    if ok and type(s) == "string" then return s end
  end
  if type(e) == "number" then return tostring(e) end
  return string.format("(error object is a %s value)", type(e))
end

local THIS_FILE = debug.getinfo(1, "S").short_src

-- Message handler: the message plus a traceback cut at the first frame of this file and
-- kept to a few lines.
local function traceback(e)
  local msg = errtext(e)
  local tb = debug.traceback("", 2)
  local all = {}
  for line in tb:gmatch("[^\n]+") do all[#all + 1] = line end
  -- the user's frames end at the last xpcall or _repl_eval (the one this file made)
  local stop = #all + 1
  for i = #all, 1, -1 do
    if all[i]:find("in function 'xpcall'", 1, true) or all[i]:find("_repl_eval'", 1, true) then
      stop = i
      break
    end
  end
  local lines = {}
  for i = 1, stop - 1 do
    local line = all[i]
    if not line:find("^stack traceback:") and not line:find("^%s*$")
      and not line:find(THIS_FILE, 1, true)
      and not line:find("^%s*%[C%]: in function 'error'$") then
      lines[#lines + 1] = line
    end
  end
  local LIMIT = 12
  if #lines > LIMIT then
    local n = #lines - LIMIT
    for _ = 1, n do table.remove(lines, LIMIT // 2 + 1) end
    table.insert(lines, LIMIT // 2 + 1, string.format("\t...\t(skipping %d levels)", n))
  end
  if #lines == 0 then return msg end
  return msg .. "\nstack traceback:\n" .. table.concat(lines, "\n")
end
M.traceback = traceback

-------------------------------------------------------------------------------- values

local function is_tensor(v)
  if type(v) ~= "userdata" then return false end
  local lt = package.loaded["lantern"]
  if type(lt) ~= "table" then return false end
  local f = rawget(lt, "is_tensor")
  if not f then return false end
  local ok, r = pcall(f, v)
  return ok and r
end

local function safe_tostring(v)
  local ok, s = pcall(tostring, v)
  if ok and type(s) == "string" then return s end
  return string.format("<%s: __tostring failed: %s>", type(v), errtext(s))
end

local function tensor_summary(t)
  local ok, s = pcall(function()
    local size = t:size()
    local dims = {}
    for i = 1, #size do dims[i] = tostring(size[i]) end
    return string.format("tensor<%s [%s]>", tostring(t.dtype), table.concat(dims, ", "))
  end)
  return ok and s or safe_tostring(t)
end

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local function is_ident(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil and not KEYWORDS[s]
end

-- A value inside a table: one line.
local function short(v)
  local tv = type(v)
  if tv == "string" then
    if #v > 60 then v = v:sub(1, 57) .. "..." end
    return (string.format("%q", v):gsub("\\\n", "\\n"))
  elseif tv == "table" then
    local mt = getmetatable(v)
    if mt and mt.__tostring then
      local s = safe_tostring(v)
      if not s:find("\n") and #s <= 60 then return s end
      return "<" .. (type(mt.__name) == "string" and mt.__name or "table") .. ">"
    end
    return next(v) == nil and "{}" or "{...}"
  elseif is_tensor(v) then
    return tensor_summary(v)
  end
  return safe_tostring(v)
end

local MAX_ENTRIES = 40

-- A table one level deep: sequence part first, then the other keys sorted.
local function shallow(t)
  local parts, seen, n = {}, {}, 0
  local len = rawlen(t)
  for i = 1, len do
    local v = rawget(t, i)
    if v == nil then break end
    n = n + 1
    seen[i] = true
    if n <= MAX_ENTRIES then parts[#parts + 1] = short(v) end
  end
  local keys = {}
  for k in next, t do
    if not seen[k] then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    n = n + 1
    if n <= MAX_ENTRIES then
      local ks = is_ident(k) and k or ("[" .. short(k) .. "]")
      parts[#parts + 1] = ks .. " = " .. short(rawget(t, k))
    end
  end
  if n > MAX_ENTRIES then parts[#parts + 1] = string.format("... (%d more)", n - MAX_ENTRIES) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- Text the session prints for a value.
function M.repr(v)
  local tv = type(v)
  if tv == "string" then return v end
  if tv == "table" then
    local mt = getmetatable(v)
    if mt and mt.__tostring then return safe_tostring(v) end
    return shallow(v)
  end
  return safe_tostring(v)
end

-------------------------------------------------------------------------------- environment

-- Globals bound on first use, so a module that is missing or broken does not stop the session.
local LAZY = {
  lt = function() return require "lantern" end,
  nn = function() return require("lantern").nn end,
  F = function() return require("lantern").nn.functional end,
  optim = function() return require("lantern").optim end,
  help = function() return require("lantern.help").help end,
}
local LAZY_ORDER = { "lt", "nn", "F", "optim", "help" }

local function install_lazy_globals(env)
  local mt = getmetatable(env) or {}
  local prev = mt.__index
  mt.__index = function(t, k)
    local loader = LAZY[k]
    if loader then
      local ok, v = pcall(loader)
      if ok and v ~= nil then
        rawset(t, k, v)
        return v
      end
      if not ok then
        error(string.format("global '%s' is not available: %s", k, errtext(v)), 2)
      end
    end
    if type(prev) == "function" then return prev(t, k) end
    if type(prev) == "table" then return prev[k] end
    return nil
  end
  setmetatable(env, mt)
end

-------------------------------------------------------------------------------- completion

-- Names reachable from a value with `.` (or `:` when methods_only).
local function members(v, methods_only)
  local out, seen = {}, {}
  local function add(k, val)
    if type(k) ~= "string" or seen[k] or not k:match("^[%a_][%w_]*$") then return end
    if methods_only and type(val) ~= "function" and val ~= true then
      -- a callable table (a class) counts as a method too
      local mt = type(val) == "table" and getmetatable(val)
      if not (mt and mt.__call) then return end
    end
    seen[k] = true
    out[#out + 1] = k
  end
  local function walk(t, depth)
    if type(t) ~= "table" or depth > 8 then return end
    for k, val in next, t do add(k, val) end
    local mt = getmetatable(t)
    if type(mt) == "table" then
      if type(mt.__index) == "table" then walk(mt.__index, depth + 1) end
      if type(rawget(mt, "__class")) == "table" then walk(rawget(mt, "__class"), depth + 1) end
    end
  end
  if type(v) == "string" then
    walk(string, 0)
  elseif is_tensor(v) then
    local lt = package.loaded["lantern"]
    walk(rawget(lt, "Tensor") or {}, 0)
    if not methods_only then
      for _, k in ipairs { "dtype", "shape", "device", "grad", "requires_grad", "grad_fn",
        "is_leaf", "ndim", "data", "T" } do
        local ok, val = pcall(function() return v[k] end)
        if ok and val ~= nil then add(k, val) end
      end
    end
  elseif type(v) == "table" then
    walk(v, 0)
    -- a Module's parameters, buffers and children live in registries
    for _, reg in ipairs { "_parameters", "_buffers", "_modules" } do
      local ok, r = pcall(function() return v[reg] end)
      if ok and type(r) == "table" and type(r.keys) == "table" then
        for _, k in ipairs(r.keys) do add(k, true) end
      end
    end
  end
  table.sort(out)
  return out
end

--- Completions of `word` (the text readline is completing) against environment `env`.
function M.complete(env, word)
  local head, expr = word:match("^(.-)([%w_%.:]*)$")
  local path, sep, partial = expr:match("^(.*)([%.:])([%w_]*)$")
  local candidates = {}
  if not path then
    if expr:match("^%d") then return {} end
    partial = expr
    local seen = {}
    local function add(k)
      if type(k) == "string" and not seen[k] then seen[k] = true; candidates[#candidates + 1] = k end
    end
    local t, depth = env, 0
    while type(t) == "table" and depth < 8 do
      for k in next, t do if is_ident(k) then add(k) end end
      local mt = getmetatable(t)
      t, depth = type(mt) == "table" and rawget(mt, "__index") or nil, depth + 1
    end
    for _, k in ipairs(LAZY_ORDER) do add(k) end
    for k in pairs(KEYWORDS) do add(k) end
    table.sort(candidates)
    path, sep = "", ""
  else
    if path == "" or path:find(":", 1, true) then return {} end
    local v = env
    for name in (path .. "."):gmatch("(.-)%.") do
      if not name:match("^[%a_][%w_]*$") then return {} end
      local ok, nv = pcall(function() return v[name] end)
      if not ok or nv == nil then return {} end
      v = nv
    end
    candidates = members(v, sep == ":")
  end
  local out = {}
  local private = partial:sub(1, 1) == "_"
  for _, k in ipairs(candidates) do
    -- names starting with "_" (internals, metamethods) only when asked for
    if k:sub(1, #partial) == partial and (private or k:sub(1, 1) ~= "_") then
      out[#out + 1] = head .. path .. sep .. k
    end
  end
  return out
end

-------------------------------------------------------------------------------- input

-- The session's C helpers (src/bind/l_repl.c), or nil when lantern.core does not load: the
-- session then works as plain Lua, without Ctrl-C handling.
local function repl_core()
  local ok, core = pcall(require, "lantern.core")
  if ok and type(core) == "table" and core._repl_eval then return core end
  return nil
end

-- What a terminal sends for keys that a line without readline cannot use: CSI and SS3
-- sequences (arrows, Home, F-keys), other ESC pairs, and Tab. Left in, an Up arrow makes the
-- line start with ESC, which load() takes for a binary chunk.
local function strip_keys(line)
  line = line:gsub("\27%[[%d;?]*[ -/]*[@-~]", ""):gsub("\27O.", ""):gsub("\27.?", "")
  return (line:gsub("\t", " "))
end
M.strip_keys = strip_keys

local NO_READLINE_HINT = "(no line editing or Tab completion: they need lua-readline, " ..
  "e.g. sudo apt-get install lua-readline)\n"

-- Returns an object with :read(prompt) -> line, or nil at end of input.
local function make_reader(interactive_tty, env, core)
  local reader = {}
  local rl
  if interactive_tty and os.getenv("LANTERN_NO_READLINE") ~= "1" then
    local ok, mod = pcall(require, "readline")
    if ok and type(mod) == "table" then rl = mod end
  end
  if rl then
    -- History: kept in memory by readline and appended to the file line by line, so that it
    -- survives a session that is killed.
    local histfile = os.getenv("LANTERN_HISTORY")
    if histfile == nil then histfile = (os.getenv("HOME") or ".") .. "/.lantern_history" end
    pcall(rl.set_options, { histfile = "", auto_add = false, completion = true })
    local KEEP, last = 1000, nil
    if histfile ~= "" then
      local lines = {}
      local f = io.open(histfile, "r")
      if f then
        for line in f:lines() do lines[#lines + 1] = line end
        f:close()
      end
      if #lines > KEEP then
        table.move(lines, #lines - KEEP + 1, #lines, 1)
        for i = #lines, KEEP + 1, -1 do lines[i] = nil end
        f = io.open(histfile, "w")
        if f then
          f:write(table.concat(lines, "\n"), "\n")
          f:close()
        end
      end
      for _, line in ipairs(lines) do rl.add_history(line) end
      last = lines[#lines]
    end
    if rl.set_readline_name then pcall(rl.set_readline_name, "lantern") end
    if rl.set_complete_function then
      rl.set_complete_function(function(text, from, to)
        -- readline resets the append character before each completion: no space after a name
        if rl.set_completion_append_character then
          pcall(rl.set_completion_append_character, "")
        end
        local ok, res = pcall(M.complete, env, text:sub(from, to))
        return ok and res or {}
      end)
    end
    local read_line = rl.readline
    if core and core._repl_readline then
      read_line = function(prompt)
        while true do
          local r = table.pack(core._repl_readline(prompt))
          -- nothing: the readline library could not be reached, lua-readline's call serves
          if r.n == 0 then
            read_line = rl.readline
            return rl.readline(prompt)
          end
          if r[1] ~= false then return r[1] end
        end
      end
    end
    function reader.read(_, prompt)
      local line = read_line(prompt)
      if line and line:find("%S") and line ~= last then
        rl.add_history(line)
        last = line
        if histfile ~= "" then
          local f = io.open(histfile, "a")
          if f then
            f:write(line, "\n")
            f:close()
          end
        end
      end
      return line
    end
    reader.readline = true
  else
    reader.hint = interactive_tty and NO_READLINE_HINT or nil
    function reader.read(_, prompt)
      while true do
        if interactive_tty then
          stdout:write(prompt)
          stdout:flush()
        end
        local line = io.read("l")
        if line then return interactive_tty and strip_keys(line) or line end
        -- a Ctrl-C interrupts the read (the terminal has dropped the typed text and echoed ^C)
        if not (core and core._repl_interrupted()) then return nil end
        stdout:write("\n")
        stdout:flush()
      end
    end
  end
  return reader
end

-------------------------------------------------------------------------------- session

local function incomplete(msg)
  return type(msg) == "string" and (msg:sub(-5) == "<eof>" or msg:sub(-7) == "'<eof>'")
end

local function report(msg)
  stderr:write(msg, "\n")
  stderr:flush()
end

local function print_results(res)
  if res.n == 0 then return end
  local parts = {}
  for i = 1, res.n do parts[i] = M.repr(res[i]) end
  stdout:write(table.concat(parts, "\t"), "\n")
  stdout:flush()
end

-- The tokens of a chunk that matter for finding its top-level statements: names and keywords
-- with their positions; strings, comments and numbers are skipped, other symbols kept.
local function tokens(src)
  local toks, i, n = {}, 1, #src
  while i <= n do
    local c = src:sub(i, i)
    if c:match("%s") then
      i = i + 1
    elseif src:sub(i, i + 1) == "--" then
      local eq = src:match("^%[(=*)%[", i + 2)
      if eq then
        local _, e = src:find("]" .. eq .. "]", i, true)
        i = (e or n) + 1
      else
        i = (src:find("\n", i, true) or n) + 1
      end
    elseif c == "[" and src:match("^%[=*%[", i) then
      local eq = src:match("^%[(=*)%[", i)
      local _, e = src:find("]" .. eq .. "]", i, true)
      i = (e or n) + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then j = j + 2
        elseif d == c or d == "\n" then break
        else j = j + 1 end
      end
      i = j + 1
    elseif c:match("[%a_]") then
      local s, e = src:find("^[%w_]+", i)
      toks[#toks + 1] = { src:sub(s, e), s, e }
      i = e + 1
    elseif c:match("%d") then
      local _, e = src:find("^[%w%.]+", i)
      i = e + 1
    else
      toks[#toks + 1] = { c, i, i }
      i = i + 1
    end
  end
  return toks
end

local OPENS = { ["do"] = true, ["if"] = true, ["function"] = true, ["repeat"] = true }
local CLOSES = { ["end"] = true, ["until"] = true }

--- The chunk with its top-level `local` statements made assignments to globals, which is how
-- the session keeps them from one input to the next (each input is compiled as its own chunk):
-- `local x, y = 1` -> `x, y = 1`, `local z` -> `z = nil`, `local function f` -> `function f`,
-- `<const>` dropped. Locals inside blocks and functions, and `<close>` variables, whose point is
-- to be closed at the end of the chunk, stay local.
function M.globalize(src)
  local toks = tokens(src)
  local edits = {}   -- {from, to, replacement}
  local depth, k = 0, 1
  while k <= #toks do
    local t = toks[k][1]
    if OPENS[t] then
      depth = depth + 1
    elseif CLOSES[t] then
      depth = math.max(depth - 1, 0)
    elseif t == "local" and depth == 0 then
      local nxt = toks[k + 1]
      if nxt and nxt[1] == "function" then
        edits[#edits + 1] = { toks[k][2], toks[k][3], "" }
      elseif nxt and nxt[1]:match("^[%a_]") then
        local j, close, attrs = k + 1, false, {}
        while toks[j] and toks[j][1]:match("^[%a_]") do
          local lt_tok = toks[j + 1]
          if lt_tok and lt_tok[1] == "<" and toks[j + 2] and toks[j + 3] and toks[j + 3][1] == ">" then
            if toks[j + 2][1] == "close" then close = true end
            attrs[#attrs + 1] = { lt_tok[2], toks[j + 3][3] }
            j = j + 3
          end
          if toks[j + 1] and toks[j + 1][1] == "," then j = j + 2 else break end
        end
        if not close then
          edits[#edits + 1] = { toks[k][2], toks[k][3], "" }
          for _, a in ipairs(attrs) do edits[#edits + 1] = { a[1], a[2], "" } end
          local after = toks[j + 1]
          if not (after and after[1] == "=") then
            edits[#edits + 1] = { toks[j][3] + 1, toks[j][3], " = nil" }
          end
        end
        k = j
      end
    end
    k = k + 1
  end
  table.sort(edits, function(a, b) return a[1] > b[1] end)
  for _, e in ipairs(edits) do src = src:sub(1, e[1] - 1) .. e[3] .. src:sub(e[2] + 1) end
  return src
end

-- Session commands, typed on a line of their own.
local COMMANDS = {
  time = function(state, arg)
    if arg == "on" then state.timer = true
    elseif arg == "off" then state.timer = false
    elseif arg == "" then state.timer = not state.timer
    else return "usage: :time [on|off]" end
    stdout:write("timer ", state.timer and "on" or "off", "\n")
    stdout:flush()
  end,
}

-- `?expr`: the help of what expr evaluates to, or of the text when that is nil or an error
-- (`?narrow` looks the name up).
local function help_chunk(text, env)
  text = text:match("^%s*(.-)%s*$")
  return function()
    local help = env.help or require("lantern.help").help
    if text == "" then return help() end
    local f = load("return " .. text, "=stdin", "t", env)
    local ok, v = false, nil
    if f then ok, v = pcall(f) end
    if ok and v ~= nil then return help(v) end
    return help(text)
  end
end

-- Reads one complete chunk: returns the compiled function (or a command's function), or nil
-- and an error message, or nothing at end of input.
local function read_chunk(reader, env, state)
  local prompt = rawget(env, "_PROMPT") or "> "
  local line = reader:read(tostring(prompt))
  if line == nil then return end
  local cmd, arg = line:match("^%s*:(%a+)%s*(.-)%s*$")
  if cmd then
    local fn = COMMANDS[cmd]
    if not fn then return nil, "unknown command :" .. cmd .. " (commands: :time)" end
    return function() local msg = fn(state, arg) if msg then report(msg) end end, nil, true
  end
  if line:match("^%s*%?") then return help_chunk(line:match("^%s*%?(.*)$"), env), nil, true end
  if line:sub(1, 1) == "=" then line = "return " .. line:sub(2) end
  local buf = line
  while true do
    -- an expression first, as lua.c does, then a statement
    local fe, eerr = load("return " .. buf, "=stdin", "t", env)
    if fe then return fe end
    local fn, err = load(M.globalize(buf), "=stdin", "t", env)
    if fn then return fn end
    if not incomplete(err) and not incomplete(eerr) then
      -- `1 +* 2`: the expression's message says more than "unexpected symbol near '1'"
      local first = buf:match("^%s*([%w_]+)") or buf:match("^%s*(%S)")
      if first and not incomplete(eerr) and
        err:find("unexpected symbol near '" .. first .. "'", 1, true) then
        err = eerr
      end
      return nil, err
    end
    local more = reader:read(tostring(rawget(env, "_PROMPT2") or ">> "))
    if more == nil then return nil, err end
    buf = buf .. "\n" .. more
  end
end

local function clock_fn(core)
  if core and type(core.clock) == "function" then return core.clock end
  return os.clock
end

local function show_time(dt)
  if dt < 1 then
    stdout:write(string.format("time: %.3f ms\n", dt * 1000))
  else
    stdout:write(string.format("time: %.3f s\n", dt))
  end
  stdout:flush()
end

--- Runs the interactive loop until end of input.
function M.session(env, interactive_tty, show_banner)
  local core = repl_core()
  local reader = make_reader(interactive_tty, env, core)
  if show_banner then
    local ok, err = pcall(function() return env.lt end)
    stdout:write(version_line(), "\n")
    if ok and err ~= nil then
      stdout:write("lt = require \"lantern\"; nn, F, optim are bound.  help() for help, Ctrl-D quits.\n")
    else
      stdout:write("(lantern failed to load; plain Lua)\n")
    end
    if reader.hint then stdout:write(reader.hint) end
    stdout:flush()
  end
  local state = { timer = false }
  local clock = clock_fn(core)
  -- a Ctrl-C interrupts the evaluation and the printing of its values
  local function eval(f, ...)
    if core then return core._repl_eval(traceback, f, ...) end
    return xpcall(f, traceback, ...)
  end
  if core then core._repl_prompt(true) end
  while true do
    local ok, f, err, is_command = pcall(read_chunk, reader, env, state)
    if not ok then
      report(errtext(f))
    elseif f == nil and err == nil then
      break
    elseif not f then
      report(err)
    else
      local t0 = clock()
      local res = table.pack(eval(f))
      local dt = clock() - t0
      if not res[1] then
        -- the terminal has echoed ^C without a newline
        if interactive_tty and errtext(res[2]):match("^[^\n]*interrupted!") then stderr:write("\n") end
        report(res[2])
      elseif not is_command then
        local pok, perr = eval(print_results, table.pack(table.unpack(res, 2, res.n)))
        if not pok then report(perr) end
        if state.timer then show_time(dt) end
      end
    end
  end
  if core then core._repl_prompt(false) end
  if interactive_tty then stdout:write("\n") end
end

-------------------------------------------------------------------------------- command line

-- Parses lua.c's options. Returns opts or nil, bad_option.
local function parse_args(argv)
  local opts = { actions = {} }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a:sub(1, 1) ~= "-" then
      opts.script = i
      break
    elseif a == "--" then
      if i + 1 <= #argv then opts.script = i + 1 end
      break
    elseif a == "-" then
      opts.script = i
      break
    elseif a == "--help" or a == "-h" then
      opts.help = true
    elseif a == "--version" or a == "-v" then
      opts.version = true
    elseif a == "-i" then
      opts.interactive = true
      opts.version = true
    elseif a == "-W" then
      opts.actions[#opts.actions + 1] = { "W" }
    elseif a:sub(1, 2) == "-e" or a:sub(1, 2) == "-l" then
      local kind = a:sub(2, 2)
      local val = a:sub(3)
      if val == "" then
        i = i + 1
        val = argv[i]
        if val == nil or val:sub(1, 1) == "-" then return nil, a end
      end
      opts.actions[#opts.actions + 1] = { kind, val }
      if kind == "e" then opts.has_e = true end
    else
      return nil, a
    end
    i = i + 1
  end
  return opts
end

-- The `arg` table lua.c makes: the program name and options below 0, the script at 0 and its
-- arguments at 1..; with no script the program name is at 0 and the options at 1...
local function make_arg_table(argv, script_index)
  local s = script_index or 0
  local t = { [0 - s] = PROGNAME }
  for i = 1, #argv do t[i - s] = argv[i] end
  return t
end

local function run_protected(f, ...)
  local res = table.pack(xpcall(f, traceback, ...))
  if not res[1] then
    report(PROGNAME .. ": " .. errtext(res[2]))
    return false
  end
  return true
end

local function do_library(spec)
  local glb, mod = spec:match("^([^=]+)=(.+)$")
  if not glb then
    mod = spec
    glb = spec:match("^([^%-]*)%-") or spec   -- 'a-b' -> 'a', as lua.c does
  end
  return run_protected(function()
    local v = require(mod)
    _G[glb] = v
  end)
end

local function do_string(s)
  local f, err = load(s, "=(command line)", "t", _G)
  if not f then
    report(PROGNAME .. ": " .. err)
    return false
  end
  return run_protected(f)
end

local function do_script(name, args)
  local f, err
  if name == "-" then
    f, err = load(io.read("a") or "", "=stdin", "t", _G)
  else
    f, err = loadfile(name, "t", _G)
  end
  if not f then
    report(PROGNAME .. ": " .. err)
    return false
  end
  return run_protected(f, table.unpack(args))
end

--- Entry point: `argv` is the list of command-line arguments (without the program name).
function M.main(argv)
  local opts, bad = parse_args(argv)
  if not opts then
    usage(bad)
    return 1
  end
  if opts.help then
    usage(nil, stdout)
    return 0
  end
  if opts.version then
    stdout:write(version_line(), "\n")
    stdout:flush()
  end
  _G.arg = make_arg_table(argv, opts.script)
  local script_args = {}
  if opts.script then
    for i = opts.script + 1, #argv do script_args[#script_args + 1] = argv[i] end
  end
  local interactive_default = not opts.script and not opts.has_e and not opts.version
  if opts.interactive or interactive_default or opts.has_e then
    install_lazy_globals(_G)
  end
  for _, act in ipairs(opts.actions) do
    local ok = true
    if act[1] == "W" then
      warn("@on")
    elseif act[1] == "e" then
      ok = do_string(act[2])
    elseif act[1] == "l" then
      ok = do_library(act[2])
    end
    if not ok then return 1 end
  end
  if opts.script then
    if not do_script(argv[opts.script], script_args) then return 1 end
  end
  if opts.interactive or interactive_default then
    local tty = is_tty(0)
    if tty and not opts.version then
      -- load lantern now so the banner can say whether it works
      pcall(function() return _G.lt end)
    end
    M.session(_G, tty, tty and not opts.version)
  end
  return 0
end

-- Run as the `lantern` command (bin/lantern: lua5.4 repl.lua ARGS); `require` just gets M.
local main_arg = rawget(_G, "arg")
if type(main_arg) == "table" and type(main_arg[0]) == "string"
  and debug.getinfo(1, "S").source == "@" .. main_arg[0] then
  local argv = {}
  for i = 1, select("#", ...) do argv[i] = select(i, ...) end
  local code = M.main(argv)
  stdout:flush()
  os.exit(code)
end

return M
