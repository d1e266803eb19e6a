-- Every ```lua block of README.md runs on its own: as a script in a fresh lua5.4 process, with
-- the in-tree Lantern on the paths (as bin/lantern sets them), in an empty temporary directory
-- as its working directory (so a block may write files), and it prints what its comments say.
--
-- A block states its output in comments, checked in order against what it printed, with runs of
-- white space (newlines included) counted as one space and `...` standing for any text:
--   print(x:size())            --> {5, 2}     (`-->` always states output, also on a line of
--   --> tensor([1., 2.])                       its own, for what the lines above printed)
--   print(net)                 -- Net( (fc1): Linear(...) )
-- A plain `--` comment on a line that calls print states output too, unless it reads as prose
-- (a lowercase word, a space, then another word: `-- the loss after training`).
local here = (function()
  local p = assert(io.popen("pwd"))
  local d = p:read("l")
  p:close()
  return d
end)()

local support = require "support"
local shq = support.shq
local readfile = support.readfile

-- The lua blocks: code, first line number, section heading.
local function lua_blocks(text)
  local blocks, cur, section, n = {}, nil, "(top)", 0
  for line in (text .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    if cur then
      if line:match("^```%s*$") then
        blocks[#blocks + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    elseif line:match("^```lua%s*$") then
      cur = { line = n + 1, section = section, lines = {} }
    elseif line:match("^#+%s") then
      section = line:gsub("^#+%s*", "")
    end
  end
  for _, b in ipairs(blocks) do b.code = table.concat(b.lines, "\n") .. "\n" end
  return blocks
end

-- The comment of a code line, skipping `--` inside strings.
local function comment_of(line)
  local i, quote = 1, nil
  while i <= #line do
    local c = line:sub(i, i)
    if quote then
      if c == "\\" then i = i + 1 elseif c == quote then quote = nil end
    elseif c == '"' or c == "'" then
      quote = c
    elseif line:sub(i, i + 1) == "--" then
      return line:sub(1, i - 1), line:sub(i + 2)
    end
    i = i + 1
  end
  return line, nil
end

local function expectations(block)
  local out = {}
  for i, line in ipairs(block.lines) do
    local code, comment = comment_of(line)
    if comment and comment:sub(1, 1) == ">" then
      out[#out + 1] = { text = comment:sub(2), line = block.line + i - 1 }
    elseif comment and code:find("print%s*%(") and not comment:match("^%[") then
      local text = comment:match("^%s*(.-)%s*$")
      if text ~= "" and not text:match("^%l[%w_]*%s+[%w_]") then
        out[#out + 1] = { text = text, line = block.line + i - 1 }
      end
    end
  end
  return out
end

local function squash(s) return (s:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) end

local function pattern_of(expected)
  local parts = {}
  for piece in (squash(expected) .. "..."):gmatch("(.-)%.%.%.") do
    parts[#parts + 1] = piece:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  end
  return table.concat(parts, ".-")
end

local function run_block(block)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. shq(dir)))
  local f = assert(io.open(dir .. "/block.lua", "w"))
  f:write(block.code)
  f:close()
  local build = os.getenv("LANTERN_BUILD") or "build"
  local cmd = string.format(
    "cd %s && env -u LUA_INIT -u LUA_PATH_5_4 -u LUA_CPATH_5_4 LUA_PATH=%s LUA_CPATH=%s " ..
    "timeout 300 lua5.4 block.lua > out 2> err",
    shq(dir), shq(here .. "/lua/?.lua;" .. here .. "/lua/?/init.lua;;"),
    shq(here .. "/" .. build .. "/?.so;;"))
  local ok, _, code = os.execute(cmd)
  local out, err = readfile(dir .. "/out") or "", readfile(dir .. "/err") or ""
  os.execute("rm -rf " .. shq(dir))
  return ok and 0 or code, out, err
end

local readme = assert(readfile("README.md"), "README.md not found (run from the repository root)")
local blocks = lua_blocks(readme)

describe("README.md lua blocks", function()
  it("are there", function()
    assert.is_true(#blocks >= 5, "found " .. #blocks .. " lua blocks")
  end)

  for _, b in ipairs(blocks) do
    it(string.format("run alone: the block at line %d (%s)", b.line, b.section), function()
      local code, out, err = run_block(b)
      assert(code == 0, string.format("README.md:%d (%s) exited with %s:\n%s%s", b.line, b.section,
        tostring(code), out, err))
      local text, pos = squash(out), 1
      for _, e in ipairs(expectations(b)) do
        local s, finish = text:find(pattern_of(e.text), pos)
        assert(s, string.format("README.md:%d says it prints %q; what the block printed after the " ..
          "earlier matches:\n%s", e.line, squash(e.text), text:sub(pos)))
        pos = finish + 1
      end
    end)
  end
end)

describe("README.md's package list", function()
  it("names every Debian package that make test and make demo install", function()
    local mk = assert(readfile("Makefile"))
    local pkgs = mk:match("\nPKGS = (.-)\n%S"):gsub("\\\n", " ")
    local wanted = {}
    for p in pkgs:gmatch("%S+") do wanted[#wanted + 1] = p end
    for p in mk:gmatch("EXTRA_PKGS=([%w%-%.]+)") do wanted[#wanted + 1] = p end
    assert.is_true(#wanted >= 10, pkgs)
    -- the apt-get install lines of the README, with their continuation lines
    local listed = {}
    for line in readme:gsub("\\\n", " "):gmatch("[^\n]*apt%-get install[^\n]*") do
      for p in line:match("apt%-get install(.*)$"):gsub("#.*", ""):gmatch("[%w][%w%-%.%+]*") do
        listed[p] = true
      end
    end
    for _, p in ipairs(wanted) do
      assert(listed[p], "README.md has no apt-get install line naming " .. p)
    end
  end)
end)

describe("the README spec's own reading of comments", function()
  it("finds blocks and stated output", function()
    local bs = lua_blocks("# A\n```lua\nprint(1)  --> 1\nprint(2)  -- {2}\n" ..
      "print(3)  -- the third value\nlocal s = '--> not this'\n--> 4\n```\n## B\n```sh\nx\n```\n")
    assert.are.equal(1, #bs)
    assert.are.equal(3, bs[1].line)
    assert.are.equal("A", bs[1].section)
    local e = expectations(bs[1])
    assert.are.same({ " 1", "{2}", " 4" }, { e[1].text, e[2].text, e[3].text })
    assert.are.equal(3, #e)
    assert.truthy(("Net( (fc1): Linear(a=1) )"):find(pattern_of("Net( (fc1): Linear(...) )")))
    assert.falsy(("Net( (fc2): Linear(a=1) )"):find(pattern_of("Net( (fc1): Linear(...) )")))
    assert.truthy(squash("tensor([12.,  6.,\n  0.])"):find(pattern_of("tensor([12., 6., 0.])")))
  end)
end)
