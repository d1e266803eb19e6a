--- A progress bar for loops, after Python's tqdm (`progress` in `lt.utils`).
--
--     for xb, yb in lt.utils.progress(loader, {desc = "epoch 1"}) do ... end
--     -- epoch 1:  40%|██████████               | 188/469 [00:05<00:07, 37.12it/s, loss=0.412]
-- @module lantern.utils
local check = require("lantern.options").check

local M = {}

local OPTIONS = { "desc", "total", "unit", "width", "file", "mininterval", "clock", "tty",
  "disable", "leave" }

-- Eighths of a cell, so the bar moves smoothly on a narrow terminal.
local PARTIAL = { "▏", "▎", "▍", "▌", "▋", "▊", "▉" }

-- Whether fd 1 or 2 is a terminal. Lua cannot call isatty, but a child started by
-- io.popen(cmd, "w") inherits our stdout and stderr, so `test -t` answers for us; asked once
-- per fd, since a process does not change its terminal midway.
local tty_cache = {}
local function fd_is_tty(fd)
  if tty_cache[fd] == nil then
    local term = os.getenv("TERM")
    local ok = false
    if term and term ~= "" and term ~= "dumb" then
      local pok, p = pcall(io.popen, "test -t " .. fd, "w")
      if pok and p then ok = p:close() == true end
    end
    tty_cache[fd] = ok
  end
  return tty_cache[fd]
end

local function is_terminal(file)
  if file == io.stdout then return fd_is_tty(1) end
  if file == io.stderr then return fd_is_tty(2) end
  return false
end

-- tqdm's interval format: 05:07, or 1:05:07 past an hour.
local function interval(t)
  t = math.max(0, math.floor(t))
  local h, m, s = t // 3600, t // 60 % 60, t % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s) end
  return string.format("%02d:%02d", m, s)
end

-- Postfix values as tqdm shows them: numbers with three significant digits.
local function value_str(v)
  if math.type(v) == "integer" then return tostring(v) end
  if type(v) == "number" then
    local s = string.format("%.3g", v)
    return s
  end
  if type(v) == "userdata" then
    local lt = package.loaded["lantern"]
    if lt and lt.is_tensor(v) and v:numel() == 1 then return value_str(v:item()) end
  end
  return tostring(v)
end

local Bar = {}
Bar.__index = Bar
Bar.__name = "progress"

local function now(self)
  local t = self.clock()
  if type(t) ~= "number" then
    error("progress: clock() returned " .. type(t) .. ", expected a number of seconds", 3)
  end
  return t
end

function Bar:_line()
  local elapsed = self.last_t - self.start_t
  local n = self.n
  local rate = (elapsed > 0 and n > 0) and n / elapsed or nil
  local rate_s
  if not rate then
    rate_s = "?" .. self.unit .. "/s"
  elseif rate < 1 then
    rate_s = string.format("%.2fs/%s", 1 / rate, self.unit)
  else
    rate_s = string.format("%.2f%s/s", rate, self.unit)
  end
  local post = ""
  if #self.postfix > 0 then post = ", " .. table.concat(self.postfix, ", ") end
  local desc = self.desc ~= "" and self.desc .. ": " or ""
  local total = self.total
  if not total then
    return string.format("%s%s%s [%s, %s%s]", desc, value_str(n), self.unit, interval(elapsed),
      rate_s, post)
  end
  local frac = math.min(math.max(n / total, 0), 1)
  local eta = rate and interval((total - n) / rate) or "?"
  local count = string.format("%s/%s", value_str(n), value_str(total))
  local pct = string.format("%3d%%", math.floor(frac * 100))
  local times = string.format("[%s<%s, %s%s]", interval(elapsed), eta, rate_s, post)
  if not self.terminal then
    return string.format("%s%s %s %s", desc, pct, count, times)
  end
  local eighths = math.floor(frac * self.width * 8)
  local full, part = eighths // 8, eighths % 8
  local cells = string.rep("█", full)
  if part > 0 then cells = cells .. PARTIAL[part] end
  local used = full + (part > 0 and 1 or 0)
  cells = cells .. string.rep(" ", self.width - used)
  return string.format("%s%s|%s| %s %s", desc, pct, cells, count, times)
end

function Bar:_write(s)
  self.file:write(s)
  if self.file.flush then self.file:flush() end
end

function Bar:_draw()
  if self.disable then return end
  local line = self:_line()
  if self.terminal then
    -- the previous line may have been longer: pad it away
    local len = utf8.len(line) or #line
    local pad = math.max(0, self.shown_len - len)
    self:_write("\r" .. line .. string.rep(" ", pad))
    self.shown_len = len
  else
    self:_write(line .. "\n")
  end
  self.last_draw = self.last_t
  self.drawn_n = self.n
  self.drawn = true
end

--- Counts `n` more steps (default 1) and redraws if `mininterval` seconds have passed since
-- the last drawing.
-- @number[opt=1] n
-- @return the bar
function Bar:update(n)
  if n == nil then n = 1 end
  if type(n) ~= "number" then
    error("progress: update: n must be a number, got " .. type(n), 2)
  end
  if self.closed then error("progress: update after close()", 2) end
  self.n = self.n + n
  self.last_t = now(self)
  if self.last_t - self.last_draw >= self.mininterval then self:_draw() end
  return self
end

--- Sets the values shown after the rate, `name=value` sorted by name (numbers with three
-- significant digits, one-element tensors by their value); they are drawn with the next
-- update. `bar:set_postfix{loss = 0.31, acc = 0.9}` shows `acc=0.9, loss=0.31`. `nil` clears.
-- @tparam table|nil values
function Bar:set_postfix(values)
  if values ~= nil and type(values) ~= "table" then
    error("progress: set_postfix: expected a table of values, got " .. type(values), 2)
  end
  local keys = {}
  for k in pairs(values or {}) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do
    local v = values[k]
    if v == nil then v = values[tonumber(k)] end
    out[i] = k .. "=" .. value_str(v)
  end
  self.postfix = out
  return self
end

--- Replaces the description drawn before the count.
-- @string desc
function Bar:set_description(desc)
  if type(desc) ~= "string" then
    error("progress: set_description: expected a string, got " .. type(desc), 2)
  end
  self.desc = desc
  return self
end

--- Draws the final state and ends the line (or, with `leave = false`, clears it on a
-- terminal). Called by the loop when the iterator is exhausted, when a `for` loop over the
-- bar is left by `break` or an error, and by `<close>`; closing twice does nothing.
function Bar:close()
  if self.closed then return end
  self.closed = true
  if self.disable then return end
  self.last_t = now(self)
  if self.terminal then
    if self.leave then
      self:_draw()
      self:_write("\n")
    elseif self.shown_len > 0 then
      self:_write("\r" .. string.rep(" ", self.shown_len) .. "\r")
    end
  elseif self.leave and (self.drawn_n ~= self.n or not self.drawn) then
    self:_draw()
  end
end

-- One step of a `for` loop over the bar: the step before this one is complete.
function Bar:__call()
  if self.closed or not self.iter then return nil end
  if self.started then self:update(1) end
  self.started = true
  local vals = table.pack(self.iter())
  if vals[1] == nil then
    self:close()
    return nil
  end
  return table.unpack(vals, 1, vals.n)
end

Bar.__close = function(self) self:close() end
Bar.__tostring = function(self) return self:_line() end

--- A progress bar, drawn to `file` as Python's tqdm draws it:
-- `desc:  40%|██████████               | 188/469 [00:05<00:07, 37.12it/s, loss=0.412]`
-- (count/total, percent, the bar, elapsed<remaining, rate and the postfix values).
--
-- `what` is one of
--
-- * an iterator function (`loader:iter()`): the bar yields what it yields, counting one step
--   each time the loop asks for the next value, so `for xb, yb in progress(loader:iter(),
--   {total = #loader}) do ... end`; without `total` the bar shows the count and rate only;
-- * a table with an `iter` method (a `DataLoader`): iterates `what:iter()`, total `#what`;
-- * a list: yields `i, what[i]` as `ipairs` does, total `#what`;
-- * a number: the total of a bar advanced by hand with `bar:update(n)` and ended with
--   `bar:close()` (nil for a bar without a total).
--
-- A `for` loop closes the bar when the iterator ends, and also when the loop is left by
-- `break` or an error (the bar is the loop's closing value); `local bar <close> = ...` does the
-- same for a bar used by hand.
--
-- **Terminals**: on a terminal the bar is redrawn in place (`\r`) at most every
-- `mininterval` seconds (default 0.1). Anywhere else (a file, a pipe, a log) it writes plain
-- lines without the bar, `desc:  40% 188/469 [00:05<00:07, 37.12it/s]`, at most every
-- `mininterval` seconds (default 10) and a last one when closed. `file` is a terminal when it
-- is `io.stdout` or `io.stderr`, the environment's `TERM` is set and not `dumb`, and
-- `test -t 1` (or `2`) run by `io.popen` says so; the option `tty` overrides the test.
-- @param what iterator function, table with `iter`, list, number or nil
-- @tparam[opt] table opts
-- `desc` (string before the count), `total` (number of steps),
-- `unit` (default `"it"`, as in `it/s`), `width` (cells of the bar, default 25),
-- `file` (default `io.stderr`; any object with `write` and optionally `flush`),
-- `mininterval` (seconds between drawings), `tty` (true or false: force the terminal or the
-- plain form), `leave` (default true: keep the last line; false clears it on a terminal),
-- `disable` (true: draw nothing), `clock` (function giving seconds, default `lt.clock`; for
-- tests)
-- @return the bar (callable as a `for` iterator, with `update`, `set_postfix`,
-- `set_description`, `close`; fields `n`, `total`)
-- @usage for xb, yb in lt.utils.progress(loader, {desc = "train"}) do step(xb, yb) end
-- local bar = lt.utils.progress(loader:iter(), {total = #loader, desc = "epoch 1"})
-- for xb, yb in bar do bar:set_postfix{loss = step(xb, yb)} end
-- local bar <close> = lt.utils.progress(1000, {unit = "img"})
-- for i = 1, 1000, 50 do work(i); bar:update(50) end
function M.progress(what, opts)
  opts = check("progress", opts, OPTIONS)
  local iter, total = nil, opts.total
  local tw = type(what)
  if tw == "function" then
    iter = what
  elseif tw == "number" then
    if total == nil then total = what end
  elseif tw == "table" then
    if type(what.iter) == "function" then
      iter = what:iter()
      if total == nil then total = #what end
    else
      local i, list = 0, what
      iter = function()
        i = i + 1
        if list[i] == nil then return nil end
        return i, list[i]
      end
      if total == nil then total = #what end
    end
  elseif what ~= nil then
    error("progress: expected an iterator function, a table, a number or nil, got " .. tw, 2)
  end
  if total ~= nil and (type(total) ~= "number" or total < 0) then
    error("progress: total must be a non-negative number, got " .. tostring(total), 2)
  end
  if total == 0 then total = nil end
  local file = opts.file or io.stderr
  if type(file) ~= "table" and type(file) ~= "userdata" or file.write == nil then
    error("progress: file must have a write method (io.stderr, an open file), got " .. type(file), 2)
  end
  local terminal = opts.tty
  if terminal == nil then terminal = is_terminal(file) end
  local width = opts.width or 25
  if math.type(width) ~= "integer" or width < 1 then
    error("progress: width must be a positive integer, got " .. tostring(width), 2)
  end
  local clock = opts.clock or require("lantern.core").clock
  if type(clock) ~= "function" then
    error("progress: clock must be a function, got " .. type(clock), 2)
  end
  local mininterval = opts.mininterval or (terminal and 0.1 or 10)
  if type(mininterval) ~= "number" or mininterval < 0 then
    error("progress: mininterval must be a non-negative number, got " .. tostring(mininterval), 2)
  end
  if opts.desc ~= nil and type(opts.desc) ~= "string" then
    error("progress: desc must be a string, got " .. type(opts.desc), 2)
  end
  if opts.unit ~= nil and type(opts.unit) ~= "string" then
    error("progress: unit must be a string, got " .. type(opts.unit), 2)
  end
  local self = setmetatable({
    iter = iter, total = total, n = 0, desc = opts.desc or "", unit = opts.unit or "it",
    width = width, file = file, terminal = terminal and true or false,
    mininterval = mininterval, clock = clock, disable = opts.disable == true,
    leave = opts.leave ~= false, postfix = {}, shown_len = 0, closed = false, started = false,
  }, Bar)
  self.start_t = now(self)
  self.last_t, self.last_draw, self.drawn_n = self.start_t, self.start_t, 0
  -- a terminal shows the empty bar at once, as tqdm does; a log waits for progress
  if self.terminal then self:_draw() end
  return self, nil, nil, self
end

return M
