-- The `lantern` command (lua/lantern/repl.lua): the interactive session driven through its
-- standard input (and through a pseudo-terminal when util-linux's `script` is there), the
-- script runner with lua's options, and the completion and printing helpers.
local lt = require "lantern"
local repl = require "lantern.repl"

local BIN = "bin/lantern"

local support = require "support"
local readfile = support.readfile
local writefile = support.writefile
local shq = support.shq

-- Runs `bin/lantern ARGS` with `input` on stdin; returns stdout, stderr, exit code.
local function run(args, input, env)
  local base = os.tmpname()
  writefile(base .. ".in", input or "")
  local cmd = string.format("%s%s %s < %s > %s 2> %s", env or "", BIN, args or "",
    shq(base .. ".in"), shq(base .. ".out"), shq(base .. ".err"))
  local ok, _, code = os.execute(cmd)
  local out, err = readfile(base .. ".out"), readfile(base .. ".err")
  os.remove(base); os.remove(base .. ".in"); os.remove(base .. ".out"); os.remove(base .. ".err")
  return out, err, ok and 0 or code
end

local function session(input)
  local out, err, code = run("", input)
  assert.are.equal(0, code, "session exit code; stderr: " .. tostring(err))
  return out, err
end

describe("lantern session on standard input", function()
  it("prints the values of expressions, with and without '='", function()
    local out, err = session("1+1\n=2*3\n2^10\n'text'\n")
    assert.are.equal("2\n6\n1024.0\ntext\n", out)
    assert.are.equal("", err)
  end)

  it("prints nothing for statements and keeps globals between chunks", function()
    local out = session("x = 5\nlocal y = 1\nx * 3\ny\n")
    assert.are.equal("15\n1\n", out)
  end)

  it("keeps top-level locals from one input to the next, not those of inner blocks", function()
    local out, err = session(table.concat({
      "local a, b = 1, 2",
      "local function f(n) if n == 0 then return 0 end return n + f(n - 1) end",
      "local c <const> = 10",
      "local unset",
      "do local inner = 5 end",
      "for i = 1, 2 do local loopvar = i end",
      "local g = function() local hidden = 3 return hidden end",
      "a + b, f(4), c, unset, inner, loopvar, hidden, g()",
      "local s = 'local z = 1' .. [[ local w ]] -- local q = 2",
      "z, w, q, s",
      "local x = 1; local y = x + 1",
      "x, y",
    }, "\n") .. "\n")
    assert.are.equal("", err)
    assert.are.equal("3\t10\t10\tnil\tnil\tnil\tnil\t3\n" ..
      "nil\tnil\tnil\tlocal z = 1 local w \n" .. "1\t2\n", out)
  end)

  it("runs the README's First model block pasted line by line", function()
    local f = assert(io.open("README.md"))
    local readme = f:read("a")
    f:close()
    local block = readme:match("## First model.-```lua\n(.-)```")
    assert.truthy(block, "README has a First model block")
    local out, err = session(block .. "scores.shape[1], scores.shape[2], #net:parameters()\n")
    assert.are.equal("", err)
    assert.truthy(out:find("8\t3\t4\n$"), out)
  end)

  it("gives what the README's session transcripts show", function()
    local f = assert(io.open("README.md"))
    local readme = f:read("a")
    f:close()
    local n = 0
    -- transcripts: plain ``` blocks whose lines start with the prompt
    local blocks, fence, cur = {}, nil, nil
    for line in readme:gmatch("([^\n]*)\n") do
      if fence then
        if line:match("^```%s*$") then
          if fence == "" then blocks[#blocks + 1] = table.concat(cur, "\n") end
          fence = nil
        else
          cur[#cur + 1] = line
        end
      else
        fence = line:match("^```(%w*)%s*$")
        cur = {}
      end
    end
    for _, block in ipairs(blocks) do
      if block:match("^> ") then
        n = n + 1
        local input, expected = {}, {}
        for line in (block .. "\n"):gmatch("(.-)\n") do
          local typed = line:match("^>>? (.*)$")
          if typed then input[#input + 1] = typed else expected[#expected + 1] = line end
        end
        local out, err = session(table.concat(input, "\n") .. "\n")
        assert.are.equal("", err)
        assert.are.equal(table.concat(expected, "\n") .. "\n", out)
      end
    end
    assert.is_true(n >= 1, "no transcript found in README.md")
  end)

  it("prints the reference text with help(f) and ?f", function()
    local out, err = session("help(lt.zeros)\n?lt.zeros\n? lt.tidy\n")
    assert.are.equal("", err)
    local text = "lt.zeros(...)\nA tensor of zeros."
    local first = out:find(text, 1, true)
    assert.truthy(first, out)
    assert.truthy(out:find(text, first + 1, true), out)
    assert.truthy(out:find("Parameters:\n  ...   sizes, as numbers or one table\n", 1, true), out)
    assert.truthy(out:find("lt.tidy(fn, ...)\nRuns `fn(...)` in a release scope", 1, true), out)
    -- help() alone, and a misspelt name, say how to use it
    out = session("help()\n?\n?lt.zeroes\n")
    local _, n = out:gsub("help%(lt%.zeros%)", "")
    assert.are.equal(2, n, out)
    assert.truthy(out:find("no reference text for 'lt.zeroes'", 1, true), out)
  end)

  it("times each statement after :time", function()
    local out, err = session(":time\n1 + 1\nx = 2\n:time off\n3\n:tim\n")
    assert.truthy(out:find("^timer on\n2\ntime: [%d%.]+ ms\ntime: [%d%.]+ ms\ntimer off\n3\n$"), out)
    assert.truthy(err:find("unknown command :tim", 1, true), err)
  end)

  it("continues an unfinished chunk on the next lines", function()
    local out = session("function f(a)\n  return a * 2\nend\nf(21)\nlocal s = [[a\nb]] return s\n1 +\n2\n")
    assert.are.equal("42\na\nb\n3\n", out)
  end)

  it("prints several values separated by tabs", function()
    assert.are.equal("1\ta\tnil\ttrue\n", session("1, 'a', nil, true\n"))
  end)

  it("shows tables one level deep", function()
    local out = session("{1, 2, a = 3, b = {1}, c = 's', [10] = false, e = {}}\n")
    -- the sequence, then the other keys sorted (numbers before strings)
    assert.are.equal('{1, 2, [10] = false, a = 3, b = {...}, c = "s", e = {}}\n', out)
  end)

  it("shows an error with a short traceback and goes on", function()
    local out, err = session(
      "local function inner() error('boom') end local function outer() inner() end outer()\n" ..
      "'after'\n")
    assert.are.equal("after\n", out)
    assert.truthy(err:find("stdin:1: boom\nstack traceback:\n", 1, true), err)
    -- top-level locals are globals of the session
    assert.truthy(err:find("in function 'inner'", 1, true), err)
    assert.truthy(err:find("in main chunk", 1, true), err)
    -- the session's own frames are not shown
    assert.falsy(err:find("repl.lua", 1, true), err)
    assert.falsy(err:find("xpcall", 1, true), err)
  end)

  it("reports syntax errors and non-string error objects", function()
    local out, err = session("1 +* 2\nerror({})\nerror(setmetatable({}, {__tostring = function() return 'custom' end}))\n7\n")
    assert.are.equal("7\n", out)
    assert.truthy(err:find("stdin:1: unexpected symbol near '*'", 1, true), err)
    assert.truthy(err:find("(error object is a table value)", 1, true), err)
    assert.truthy(err:find("custom", 1, true), err)
  end)

  it("binds lt, and nn, F, optim lazily", function()
    local out = session("type(lt), lt == require 'lantern'\nrawget(_G, 'optim') == nil\nundefined_name\n")
    assert.are.equal("table\ttrue\ntrue\nnil\n", out)
    local has_nn = pcall(function() return lt.nn.Module end)
    if has_nn then
      assert.are.equal("true\n", session("nn == lt.nn\n"))
    end
  end)

  it("pretty-prints tensors", function()
    local t = lt.tensor { { 1.5, 2 }, { 3, 4 } }
    local out = session("lt.tensor{{1.5, 2}, {3, 4}}\n")
    assert.are.equal(tostring(t) .. "\n", out)
    -- inside a table a tensor is summarised on one line
    out = session("{w = lt.zeros(2, 3)}\n")
    assert.are.equal("{w = tensor<float32 [2, 3]>}\n", out)
  end)

  it("prints a module through its tostring", function()
    local ok, Linear = pcall(function() return lt.nn.Linear end)
    if not (ok and Linear) then return pending("lt.nn.Linear is not there yet") end
    local expected = tostring(Linear(2, 3))
    assert.are.equal(expected .. "\n", session("nn.Linear(2, 3)\n"))
  end)

  it("does not print a prompt or banner when standard input is not a terminal", function()
    local out = session("")
    assert.are.equal("", out)
  end)
end)

describe("lantern command line", function()
  local script

  before_each(function()
    script = os.tmpname() .. ".lua"
    writefile(script, [[
local n = select("#", ...)
print(arg[0] == (...) and "bad" or "ok", n, arg[1], arg[2], arg[-1] ~= nil, ...)
if arg[1] == "fail" then error("script failed") end
if arg[1] == "exit3" then os.exit(3) end
]])
  end)
  after_each(function() os.remove(script) end)

  it("runs a script with arg and ... set as lua does", function()
    local out, err, code = run(shq(script) .. " a b")
    assert.are.equal(0, code, err)
    assert.are.equal("ok\t2\ta\tb\ttrue\ta\tb\n", out)
    out = run("-e " .. shq("print(#arg, arg[0])"))
    assert.are.equal("2\tlantern\n", out)
    out = run("-e " .. shq("print(arg[-1], arg[0], arg[1])") .. " " .. shq(script) .. " z")
    assert.are.equal("print(arg[-1], arg[0], arg[1])\t" .. script .. "\tz\nok\t1\tz\tnil\ttrue\tz\n", out)
  end)

  it("exits with the script's status and reports its error", function()
    local out, err, code = run(shq(script) .. " fail")
    assert.are.equal(1, code)
    assert.truthy(err:find("^lantern: [^\n]*:3: script failed\nstack traceback:"), err)
    _, _, code = run(shq(script) .. " exit3")
    assert.are.equal(3, code)
    out, err, code = run("/nonexistent/x.lua")
    assert.are.equal(1, code)
    assert.truthy(err:find("cannot open /nonexistent/x.lua", 1, true), err)
    assert.are.equal("", out)
  end)

  it("handles -e, -l and -l g=mod in order", function()
    local out, err, code = run("-e 'x = 1' -l string -e 'print(x, type(string))' -l s=string -e 'print(s == string)'")
    assert.are.equal(0, code, err)
    assert.are.equal("1\ttable\ntrue\n", out)
    out, err, code = run("-e 'error(\"e-fail\")'")
    assert.are.equal(1, code)
    assert.truthy(err:find("lantern: (command line):1: e-fail", 1, true), err)
    _, err, code = run("-l no.such.module")
    assert.are.equal(1, code)
    assert.truthy(err:find("module 'no.such.module' not found", 1, true), err)
  end)

  it("binds lt for -e chunks", function()
    local out = run("-e 'print(lt == require \"lantern\")'")
    assert.are.equal("true\n", out)
  end)

  it("enters the session after -i", function()
    local out, err, code = run("-e 'x = 20' -i", "x + 1\n")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("^Lantern [%d%.]+ %(Lua 5%.4%)"), out)
    assert.truthy(out:find("\n21\n", 1, true), out)
  end)

  it("runs standard input as a script with '-'", function()
    local out, err, code = run("- q", "print(arg[0], ...)\n1 + 1\n")
    -- '1 + 1' is not a statement: a script is compiled whole, not line by line
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find("stdin:2:", 1, true), err)
    out, err, code = run("- q", "print(arg[0], ...)\n")
    assert.are.equal(0, code, err)
    assert.are.equal("-\tq\n", out)
  end)

  it("prints the version and the usage", function()
    local out, _, code = run("-v")
    assert.are.equal(0, code)
    assert.are.equal("Lantern " .. lt.__version .. " (Lua 5.4)  tensors and autograd for Lua\n", out)
    assert.are.equal(out, (run("--version")))
    out, _, code = run("--help")
    assert.are.equal(0, code)
    assert.truthy(out:find("^usage: lantern %[options%] %[script %[args%]%]"), out)
    assert.truthy(out:find("-e stat", 1, true))
    local err
    out, err, code = run("--bogus")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find("unrecognized option '--bogus'", 1, true), err)
    _, err, code = run("-e")
    assert.are.equal(1, code)
    assert.truthy(err:find("'-e' needs argument", 1, true), err)
  end)
end)

describe("lantern.repl helpers", function()
  it("completes globals, fields after '.' and methods after ':'", function()
    local env = setmetatable({ s = "abc", t = lt.zeros(2), cfg = { alpha = 1, beta = 2, [3] = 0 },
      lt = lt },
      { __index = _G })
    local function has(list, x)
      for _, v in ipairs(list) do if v == x then return true end end
      return false
    end
    assert.are.same({ "string.upper" }, repl.complete(env, "string.upp"))
    assert.are.same({ "cfg.alpha" }, repl.complete(env, "cfg.al"))
    assert.are.same({ "cfg.alpha", "cfg.beta" }, repl.complete(env, "cfg."))
    -- names starting with "_" only when the prefix asks for them
    env.cfg._hidden = 1
    assert.are.same({ "cfg.alpha", "cfg.beta" }, repl.complete(env, "cfg."))
    assert.are.same({ "cfg._hidden" }, repl.complete(env, "cfg._"))
    assert.are.same({ "s:upper" }, repl.complete(env, "s:upp"))
    assert.truthy(has(repl.complete(env, "t:num"), "t:numel"))
    assert.truthy(has(repl.complete(env, "t:"), "t:size"))
    assert.truthy(has(repl.complete(env, "t."), "t.dtype"))
    assert.falsy(has(repl.complete(env, "t:"), "t:dtype"))   -- not a method
    -- text before the expression is kept; globals, lazy names and keywords complete
    assert.truthy(has(repl.complete(env, "print(lt.zer"), "print(lt.zeros"))
    assert.truthy(has(repl.complete(env, "pri"), "print"))
    assert.truthy(has(repl.complete(env, "func"), "function"))
    assert.truthy(has(repl.complete({}, "opt"), "optim"))
    assert.are.same({}, repl.complete(env, "nosuch.x"))
    assert.are.same({}, repl.complete(env, "s:upper():x"))
    assert.are.same({}, repl.complete(env, "12"))
  end)

  it("completes a module's children and parameters", function()
    local ok, nn = pcall(function() return lt.nn end)
    if not (ok and nn and nn.Linear) then return pending("lt.nn.Linear is not there yet") end
    local env = { m = nn.Linear(2, 3) }
    local c = repl.complete(env, "m.")
    local function has(x) for _, v in ipairs(c) do if v == x then return true end end return false end
    assert.truthy(has("m.weight"))
    assert.truthy(has("m.bias"))
    assert.truthy(has("m.forward"))
    assert.truthy(has("m.state_dict"))
  end)

  it("makes top-level locals globals of the session, and leaves the others alone", function()
    assert.are.equal(" x, y = 1, 2", repl.globalize("local x, y = 1, 2"))
    assert.are.equal(" z = nil", repl.globalize("local z"))
    assert.are.equal(" function f() local a = 1 end", repl.globalize("local function f() local a = 1 end"))
    assert.are.equal(" c  = 3", repl.globalize("local c <const> = 3"))
    assert.are.equal("local r <close> = t", repl.globalize("local r <close> = t"))
    assert.are.equal("if a then local b = 1 end  d = 2", repl.globalize("if a then local b = 1 end local d = 2"))
    assert.are.equal("s = 'local q' -- local w\n", repl.globalize("s = 'local q' -- local w\n"))
    assert.are.equal("repeat local u = 1 until u  v = u == nil", repl.globalize("repeat local u = 1 until u local v = u == nil"))
  end)

  it("drops the keys a terminal sends that a line without readline cannot use", function()
    assert.are.equal("1 + 2", repl.strip_keys("\27[A1 +\t2\27[D"))
    assert.are.equal("x", repl.strip_keys("\27OAx\27[1;5C\27[3~"))
  end)

  it("formats values as the session prints them", function()
    assert.are.equal("plain", repl.repr("plain"))
    assert.are.equal("{}", repl.repr({}))
    assert.are.equal('{"a\\nb"}', repl.repr({ "a\nb" }))
    -- keys sorted, quoted when they are not names
    assert.are.equal('{["end"] = 3, ["not ident"] = 2, x = 1}',
      repl.repr({ x = 1, ["not ident"] = 2, ["end"] = 3 }))
    assert.are.equal('{1, 2, [1.5] = 0, [4] = 4}', repl.repr({ 1, 2, nil, 4, [1.5] = 0 }))
    local big = {}
    for i = 1, 100 do big[i] = i end
    local s = repl.repr(big)
    assert.truthy(s:find(", 40, ... (60 more)}", 1, true), s)
    assert.are.equal("custom", repl.repr(setmetatable({}, { __tostring = function() return "custom" end })))
  end)
end)

-- Through a pseudo-terminal: readline's line editing, Tab completion and persistent history.
local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true end
local has_readline = pcall(require, "readline")

describe("lantern session in a terminal", function()
  if not have("script") then
    it("needs util-linux's script", function() pending("script(1) is not installed") end)
    return
  end

  -- under the sanitizer build (make check) only the session is instrumented, not script(1)
  local preload = os.getenv("LD_PRELOAD")
  -- exec: script(1) runs the command with $SHELL -c, and a shell that stays as the session's
  -- parent (dash does) is killed by the Ctrl-C's the specs send
  local child = "exec " .. (preload and ("env LD_PRELOAD=" .. shq(preload) .. " " .. BIN) or BIN)
  local script_cmd = preload and "env -u LD_PRELOAD script" or "script"

  local home
  before_each(function()
    home = os.tmpname()
    os.remove(home)
    assert(os.execute("mkdir -p " .. shq(home)))
  end)
  after_each(function() os.execute("rm -rf " .. shq(home)) end)

  local function tty(input, extra_env)
    local base = os.tmpname()
    writefile(base .. ".in", input)
    local env = string.format("HOME=%s LANTERN_HISTORY=%s %s", shq(home), shq(home .. "/history"),
      extra_env or "")
    local cmd = string.format("%s timeout 20 %s -qec %s /dev/null < %s > %s 2>&1", env,
      script_cmd, shq(child), shq(base .. ".in"), shq(base .. ".out"))
    os.execute(cmd)
    local out = readfile(base .. ".out") or ""
    os.remove(base); os.remove(base .. ".in"); os.remove(base .. ".out")
    -- drop carriage returns and terminal control sequences (bracketed paste and the like)
    return (out:gsub("\r", ""):gsub("\27%[[%d;?]*%a", ""))
  end

  -- A session driven step by step: {send = bytes} writes to the terminal, {wait = text, n = k}
  -- waits (up to 20 s) until the output holds text k times. Returns the output and exit code.
  local function tty_steps(steps, extra_env)
    local base = os.tmpname()
    local sh = { "out=$1",
      'waitfor() { i=0; while [ "$(grep -o -F -- "$1" "$out" 2>/dev/null | wc -l)" -lt "$2" ] && [ $i -lt 400 ]; ' ..
        "do sleep 0.05; i=$((i+1)); done; }" }
    for _, st in ipairs(steps) do
      if st.send then
        local oct = st.send:gsub(".", function(c) return string.format("\\%03o", c:byte()) end)
        sh[#sh + 1] = "printf '" .. oct .. "'"
      else
        sh[#sh + 1] = "waitfor " .. shq(st.wait) .. " " .. (st.n or 1)
      end
    end
    writefile(base .. ".sh", table.concat(sh, "\n") .. "\n")
    local env = string.format("HOME=%s LANTERN_HISTORY=%s %s", shq(home), shq(home .. "/history"),
      extra_env or "")
    local cmd = string.format("sh %s %s | %s timeout 60 %s -qec %s /dev/null > %s 2>&1",
      shq(base .. ".sh"), shq(base .. ".out"), env, script_cmd, shq(child), shq(base .. ".out"))
    local ok, _, code = os.execute(cmd)
    local out = readfile(base .. ".out") or ""
    os.remove(base); os.remove(base .. ".sh"); os.remove(base .. ".out")
    return (out:gsub("\r", ""):gsub("\27%[[%d;?]*%a", "")), ok and 0 or code
  end

  local function count(s, text)
    local n, i = 0, 1
    while true do
      local a, b = s:find(text, i, true)
      if not a then return n end
      n, i = n + 1, b + 1
    end
  end

  -- Two long evaluations interrupted with Ctrl-C, then a line abandoned with Ctrl-C at the
  -- prompt (had it been kept, the next line would read 1+6*7), then an expression.
  local INTERRUPTS = {
    { wait = "> ", n = 1 },
    { send = "print('g' .. 'o!') while true do end\n" }, { wait = "go!" }, { send = "\3" },
    { wait = "> ", n = 2 },
    { send = "print('a' .. 'gain!') local n = 0 while true do n = n + 1 end\n" },
    { wait = "again!" }, { send = "\3" },
    { wait = "> ", n = 3 },
    { send = "1+" }, { wait = "1+" }, { send = "\3" },
    { wait = "> ", n = 4 },
    { send = "6*7\n" }, { wait = "42" }, { send = "\4" },
  }

  local function check_interrupts(out, code)
    assert.are.equal(0, code, out)
    -- "stdin:1: interrupted!", or without the position when the Ctrl-C lands while print is
    -- still returning (the hook then runs on a C function's return), as in lua5.4 itself
    assert.are.equal(2, count(out, "interrupted!"), out)
    assert.truthy(out:find("\n42\n", 1, true), out)
    assert.falsy(out:find("43", 1, true), out)
    assert.falsy(out:find("readline.lua", 1, true), out)
  end

  it("interrupts evaluations with Ctrl-C any number of times, and clears the line at the prompt", function()
    if not has_readline then return pending("lua-readline is not installed") end
    check_interrupts(tty_steps(INTERRUPTS))
  end)

  it("handles Ctrl-C the same way without readline", function()
    check_interrupts(tty_steps(INTERRUPTS, "LANTERN_NO_READLINE=1"))
  end)

  it("without readline drops arrow keys and Tab from the line and says once how to get them", function()
    local out, code = tty_steps({
      { wait = "> ", n = 1 }, { send = "\27[A1 +\t1\27[D\n" }, { wait = "> ", n = 2 },
      { send = "\27OA3\n" }, { wait = "> ", n = 3 }, { send = "\4" },
    }, "LANTERN_NO_READLINE=1")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("\n2\n", 1, true), out)
    assert.truthy(out:find("\n3\n", 1, true), out)
    assert.falsy(out:find("binary chunk", 1, true), out)
    assert.are.equal(1, count(out, "apt-get install lua-readline"), out)
  end)

  it("shows the banner and prompts, and prints values", function()
    local out = tty("6 * 7\n", "LANTERN_NO_READLINE=1")
    assert.truthy(out:find("Lantern " .. lt.__version, 1, true), out)
    assert.truthy(out:find("> ", 1, true), out)
    assert.truthy(out:find("> 42\n", 1, true), out)
  end)

  it("completes with Tab and keeps history across sessions", function()
    if not has_readline then return pending("lua-readline is not installed") end
    local out = tty('s = "abc"\ns:upp\t()\nstring.low\t("XY")\nx = lt.ones(3)\nx:num\t()\n40 + 2\n')
    assert.truthy(out:find("s:upper()", 1, true), out)
    assert.truthy(out:find("\nABC\n", 1, true), out)
    assert.truthy(out:find("\nxy\n", 1, true), out)
    assert.truthy(out:find("x:numel()", 1, true), out)
    assert.truthy(out:find("\n3\n", 1, true), out)
    local hist = readfile(home .. "/history") or ""
    assert.truthy(hist:find("40 + 2", 1, true), hist)
    -- a new session recalls the last line with the Up arrow
    out = tty("\27[A\n")
    assert.truthy(out:find("\n42\n", 1, true), out)
  end)
end)
