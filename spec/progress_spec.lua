-- lt.utils.progress: the text of a tqdm-style bar on a terminal (redrawn in place) and of the
-- plain lines written elsewhere, drawn to a fake file with an injected clock (so no assertion
-- depends on timing), the iterator forms, postfix values, and the terminal test.
local lt = require "lantern"
local progress = lt.utils.progress

local support = require "support"
local expect_error = support.expect_error

-- A file that keeps what is written, and a clock the test moves by hand.
local function sink()
  local f = { parts = {} }
  function f:write(...)
    for _, s in ipairs { ... } do self.parts[#self.parts + 1] = s end
    return self
  end
  function f:text() return table.concat(self.parts) end
  return f
end

local function clock()
  local c = { t = 100 }
  c.fn = function() return c.t end
  return c
end

-- The drawings of a terminal bar: the text between carriage returns.
local function frames(s)
  local out = {}
  for frame in s:gmatch("\r([^\r]*)") do out[#out + 1] = frame end
  return out
end

describe("lt.utils.progress", function()
  it("draws tqdm's bar in place on a terminal, at most every mininterval", function()
    local f, c = sink(), clock()
    local bar = progress(8, { desc = "train", file = f, clock = c.fn, tty = true, width = 10 })
    for i = 1, 8 do
      c.t = c.t + 0.5
      if i == 3 then bar:set_postfix { loss = 0.31234, acc = 0.9 } end
      bar:update()
      -- a second update within mininterval (0.1 s) does not draw
      if i == 5 then bar:update(0) end
    end
    bar:close()
    assert.are.same({
      "train:   0%|          | 0/8 [00:00<?, ?it/s]",
      "train:  12%|█▎        | 1/8 [00:00<00:03, 2.00it/s]",
      "train:  25%|██▌       | 2/8 [00:01<00:03, 2.00it/s]",
      "train:  37%|███▊      | 3/8 [00:01<00:02, 2.00it/s, acc=0.9, loss=0.312]",
      "train:  50%|█████     | 4/8 [00:02<00:02, 2.00it/s, acc=0.9, loss=0.312]",
      "train:  62%|██████▎   | 5/8 [00:02<00:01, 2.00it/s, acc=0.9, loss=0.312]",
      "train:  75%|███████▌  | 6/8 [00:03<00:01, 2.00it/s, acc=0.9, loss=0.312]",
      "train:  87%|████████▊ | 7/8 [00:03<00:00, 2.00it/s, acc=0.9, loss=0.312]",
      "train: 100%|██████████| 8/8 [00:04<00:00, 2.00it/s, acc=0.9, loss=0.312]",
      "train: 100%|██████████| 8/8 [00:04<00:00, 2.00it/s, acc=0.9, loss=0.312]\n",
    }, frames(f:text()))
    assert.are.equal(8, bar.n)
  end)

  it("pads a shorter drawing over a longer one, and shows slow rates as s/it", function()
    local f, c = sink(), clock()
    local bar = progress(5000, { file = f, clock = c.fn, tty = true, width = 4 })
    bar:set_postfix { note = "a long note" }
    c.t = c.t + 2
    bar:update(1)
    bar:set_postfix(nil)
    c.t = c.t + 4000
    bar:update(1)
    local got = frames(f:text())
    assert.are.equal("  0%|    | 1/5000 [00:02<2:46:38, 2.00s/it, note=a long note]", got[2])
    assert.are.equal("  0%|    | 2/5000 [1:06:42<2778:03:18, 2001.00s/it]" .. string.rep(" ", 10), got[3])
  end)

  it("writes plain lines without the bar elsewhere, every mininterval and when closed", function()
    local f, c = sink(), clock()
    local bar = progress(100, { desc = "eval", file = f, clock = c.fn, tty = false })
    for _ = 1, 100 do
      c.t = c.t + 0.25
      bar:update()
    end
    bar:close()
    -- the default interval off a terminal is 10 s: at 40 and 80 steps, and the last line
    assert.are.equal(table.concat({
      "eval:  40% 40/100 [00:10<00:15, 4.00it/s]",
      "eval:  80% 80/100 [00:20<00:05, 4.00it/s]",
      "eval: 100% 100/100 [00:25<00:00, 4.00it/s]",
    }, "\n") .. "\n", f:text())
    -- a file that is not io.stdout or io.stderr is not a terminal
    f = sink()
    bar = progress(2, { file = f, clock = c.fn, mininterval = 0 })
    bar:update(2)
    bar:close()
    assert.are.equal("100% 2/2 [00:00<?, ?it/s]\n", f:text())
  end)

  it("wraps an iterator, yielding its values and counting each finished step", function()
    local f, c = sink(), clock()
    local n = 0
    local function gen()
      n = n + 1
      if n <= 3 then return n, n * 10 end
    end
    local seen = {}
    for a, b in progress(gen, { file = f, clock = c.fn, tty = false, mininterval = 0, unit = "batch" }) do
      seen[#seen + 1] = a .. ":" .. b
      c.t = c.t + 2
    end
    assert.are.same({ "1:10", "2:20", "3:30" }, seen)
    -- no total: the count and the rate only
    assert.are.equal("1batch [00:02, 2.00s/batch]\n2batch [00:04, 2.00s/batch]\n" ..
      "3batch [00:06, 2.00s/batch]\n", f:text())
  end)

  it("iterates lists and data loaders with their lengths as totals", function()
    local f, c = sink(), clock()
    local got = {}
    for i, v in progress({ "a", "b", "c", "d" }, { file = f, clock = c.fn, tty = false }) do
      got[#got + 1] = i .. v
      c.t = c.t + 1
    end
    assert.are.same({ "1a", "2b", "3c", "4d" }, got)
    assert.are.equal(" 100% 4/4 [00:04<00:00, 1.00it/s]\n", " " .. f:text())
    local ds = lt.data.TensorDataset(lt.arange(1, 11):float(), lt.arange(1, 11))
    local loader = lt.data.DataLoader(ds, { batch_size = 4 })
    f = sink()
    local sizes = {}
    for xb, yb in progress(loader, { file = f, clock = c.fn, tty = false, desc = "load" }) do
      sizes[#sizes + 1] = xb:size(1) + yb:size(1)
      c.t = c.t + 1
    end
    assert.are.same({ 8, 8, 4 }, sizes)
    assert.are.equal("load: 100% 3/3 [00:03<00:00, 1.00it/s]\n", f:text())
    -- loader:iter() with total = #loader, as a training loop writes it
    f = sink()
    local count = 0
    for _ in progress(loader:iter(), { total = #loader, file = f, clock = c.fn, tty = false }) do
      count = count + 1
    end
    assert.are.equal(3, count)
    assert.are.equal("100% 3/3 [00:00<?, ?it/s]\n", f:text())
  end)

  it("closes the bar when a loop over it is left by break or an error", function()
    local f, c = sink(), clock()
    for i in progress({ 1, 2, 3, 4, 5 }, { file = f, clock = c.fn, tty = true, width = 5 }) do
      c.t = c.t + 1
      if i == 3 then break end
    end
    local got = frames(f:text())
    assert.are.equal(" 40%|██   | 2/5 [00:03<00:04, 1.50s/it]\n", got[#got])
    f = sink()
    local ok = pcall(function()
      for i in progress({ 1, 2, 3 }, { file = f, clock = c.fn, tty = false }) do
        if i == 2 then error("boom") end
      end
    end)
    assert.is_false(ok)
    assert.are.equal(" 33% 1/3 [00:00<?, ?it/s]\n", f:text())
    -- <close> closes a bar advanced by hand
    f = sink()
    do
      local bar <close> = progress(4, { file = f, clock = c.fn, tty = false })
      bar:update(3)
    end
    assert.are.equal(" 75% 3/4 [00:00<?, ?it/s]\n", f:text())
  end)

  it("formats postfix values as tqdm does and takes a new description", function()
    local f, c = sink(), clock()
    local bar = progress(10, { file = f, clock = c.fn, tty = false, mininterval = 0 })
    bar:set_postfix { lr = 0.00012345, step = 12, loss = lt.tensor(2.5), name = "run1", big = 1234567.0 }
    bar:set_description("epoch 2")
    c.t = c.t + 1
    bar:update(5)
    assert.are.equal("epoch 2:  50% 5/10 [00:01<00:01, 5.00it/s, big=1.23e+06, loss=2.5, " ..
      "lr=0.000123, name=run1, step=12]\n", f:text())
  end)

  it("can leave nothing behind or draw nothing", function()
    local f, c = sink(), clock()
    local bar = progress(3, { file = f, clock = c.fn, tty = true, leave = false, width = 3 })
    bar:update(3)
    bar:close()
    local text = f:text()
    local first = "\r  0%|   | 0/3 [00:00<?, ?it/s]"
    assert.are.equal(first .. "\r" .. string.rep(" ", utf8.len(first) - 1) .. "\r", text)
    f = sink()
    bar = progress(3, { file = f, clock = c.fn, tty = true, disable = true })
    bar:update(3)
    bar:close()
    bar:close()
    assert.are.equal("", f:text())
  end)

  it("refuses bad arguments naming progress", function()
    local f = sink()
    expect_error(function() progress(3, { fil = f }) end, "progress: unknown option 'fil' (did you mean 'file'?)")
    expect_error(function() progress(true) end, "progress: expected an iterator function, a table, a number or nil, got boolean")
    expect_error(function() progress(-1, { file = f }) end, "progress: total must be a non-negative number, got -1")
    expect_error(function() progress(3, { file = 5 }) end, "progress: file must have a write method")
    expect_error(function() progress(3, { file = f, width = 0 }) end, "progress: width must be a positive integer, got 0")
    expect_error(function() progress(3, { file = f, mininterval = "1" }) end, "progress: mininterval must be a non-negative number")
    expect_error(function() progress(3, { file = f, clock = function() return "now" end }) end,
      "progress: clock() returned string, expected a number of seconds")
    local bar = progress(3, { file = f, tty = false })
    expect_error(function() bar:update("1") end, "progress: update: n must be a number, got string")
    expect_error(function() bar:set_postfix(0.5) end, "progress: set_postfix: expected a table of values, got number")
    bar:close()
    expect_error(function() bar:update() end, "progress: update after close()")
  end)

  it("tells a terminal from a file or a pipe by TERM and test -t", function()
    local code = "local lt = require 'lantern'; local b = lt.utils.progress(2, {mininterval = 0}); " ..
      "b:update(); b:update(); b:close()"
    local function run(prefix, redirect)
      local out = os.tmpname()
      os.execute(string.format("%s bin/lantern -e %q %s > %s 2>&1", prefix, code, redirect or "", out))
      local fh = assert(io.open(out, "rb"))
      local s = fh:read("a")
      fh:close()
      os.remove(out)
      return s
    end
    -- stderr into a file: plain lines
    local plain = run("TERM=xterm")
    assert.truthy(plain:find("^ 50%% 1/2 %[[^\n]*%]\n100%% 2/2 %[[^\n]*%]\n$"), plain)
    -- stderr on a pseudo-terminal (script(1)): the bar, redrawn with carriage returns
    local out = os.tmpname()
    os.execute(string.format("TERM=xterm script -qec %q /dev/null > %s 2>&1 < /dev/null",
      "bin/lantern -e \"" .. code .. "\"", out))
    local fh = assert(io.open(out, "rb"))
    local tty = fh:read("a")
    fh:close()
    os.remove(out)
    assert.truthy(tty:find("\r100%|█████████████████████████| 2/2 [", 1, true), tty)
    -- the same terminal with TERM=dumb: plain lines
    out = os.tmpname()
    os.execute(string.format("TERM=dumb script -qec %q /dev/null > %s 2>&1 < /dev/null",
      "bin/lantern -e \"" .. code .. "\"", out))
    fh = assert(io.open(out, "rb"))
    local dumb = fh:read("a")
    fh:close()
    os.remove(out)
    assert.falsy(dumb:find("█", 1, true), dumb)
    assert.truthy(dumb:find("100% 2/2 [", 1, true), dumb)
  end)
end)
