-- The reference (`make docs`, LDoc) covers the public API: every name Lantern exports, found at
-- run time (lt's fields with the lazily loaded submodules, Tensor methods, nn classes and their
-- methods, F, nn.init, nn.utils, optimisers, schedulers, data, autograd, serialization, utils),
-- has an entry in LDoc's own model of the docs, internal names have none, LDoc warns about
-- nothing, and the session's help() finds the text of each function and class.
local lt = require "lantern"

local function readfile(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local support = require "support"
local shq = support.shq

-- Exported names that are not part of the API, each with the reason; they must not be
-- documented either.
local INTERNAL = {
  ["nn.keys"] = "the key order of state_dict tables, used by Lantern's own specs",
  ["optim.Optimizer.check_hparams"] = "the constructors' argument check",
}

-- Methods every layer defines, documented once on nn.Module.
local MODULE_PROTOCOL = { forward = true, extra_repr = true, reset_parameters = true }

-- The names of lt's lazily loaded fields, from the `lazy` table of lantern/init.lua.
local function lazy_names()
  local src = readfile("lua/lantern/init.lua")
  local body = assert(src:match("\nlocal lazy = (%b{})"), "lantern/init.lua has no lazy table")
  local names = {}
  for name in body:gmatch("\n%s*([%a_][%w_]*)%s*=%s*{") do names[#names + 1] = name end
  assert(#names > 5, "too few lazy entries found in lantern/init.lua")
  return names
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do if type(k) == "string" then ks[#ks + 1] = k end end
  table.sort(ks)
  return ks
end

-- Every exported name: {name = "nn.Conv2d", short = "Conv2d", value = v, page = "lantern.nn"}.
local function exported()
  for _, name in ipairs(lazy_names()) do local _ = lt[name] end
  local nn, optim = lt.nn, lt.optim
  local sched = optim.lr_scheduler
  local out = {}
  -- protocol: the methods a subclass implements for its base class (an optimiser's update, a
  -- scheduler's get_lr), documented once with the base
  local function add(prefix, page, t, filter, protocol)
    for _, k in ipairs(sorted_keys(t)) do
      local v = rawget(t, k)
      local name = prefix .. "." .. k
      if k:sub(1, 1) ~= "_" and k ~= "new" and not INTERNAL[name] and (not filter or filter(k, v)) then
        out[#out + 1] = { name = name, short = k, value = v, page = page, protocol = protocol }
      end
    end
  end
  local function methods(cls, base, extra_skip)
    return function(k, v)
      return type(v) == "function" and not (base and base[k] == v) and not (extra_skip and extra_skip[k])
    end
  end
  add("lt", "lantern", lt)
  add("Tensor", "lantern.Tensor", lt.Tensor)
  add("nn", "lantern.nn", nn)
  add("nn.Module", "lantern.nn", nn.Module, methods())
  for _, k in ipairs(sorted_keys(nn)) do
    local cls = nn[k]
    if type(cls) == "table" and rawget(cls, "__imt") and cls ~= nn.Module then
      add("nn." .. k, "lantern.nn", cls, methods(cls, nn.Module, MODULE_PROTOCOL))
    end
  end
  add("F", "lantern.nn.functional", nn.functional)
  add("nn.init", "lantern.nn.init", nn.init)
  add("nn.utils", "lantern.nn.utils", nn.utils)
  add("optim", "lantern.optim", optim)
  add("optim.Optimizer", "lantern.optim", optim.Optimizer, methods())
  for _, k in ipairs(sorted_keys(optim)) do
    if optim[k] ~= optim.Optimizer then
      add("optim." .. k, "lantern.optim", optim[k], methods(optim[k], optim.Optimizer), true)
    end
  end
  add("optim.lr_scheduler", "lantern.optim.lr_scheduler", sched)
  local base = getmetatable(sched.StepLR).__index
  add("lr_scheduler.Scheduler", "lantern.optim.lr_scheduler", base, methods())
  for _, k in ipairs(sorted_keys(sched)) do
    add("lr_scheduler." .. k, "lantern.optim.lr_scheduler", sched[k], methods(sched[k], base), true)
  end
  add("data", "lantern.data", lt.data)
  for _, k in ipairs(sorted_keys(lt.data)) do
    local cls = lt.data[k]
    if type(cls) == "table" then
      add("data." .. k, "lantern.data", cls, methods(), cls ~= lt.data.Dataset and cls ~= lt.data.DataLoader)
    end
  end
  add("autograd", "lantern.autograd", lt.autograd)
  add("autograd.Function", "lantern.autograd", lt.autograd.Function, methods())
  add("serialization", "lantern.serialization", lt.serialization)
  add("safetensors", "lantern.serialization", lt.serialization.safetensors)
  add("warnings", "lantern.warnings", lt.warnings)
  add("utils", "lantern.utils", lt.utils)
  local bar = lt.utils.progress(1, { disable = true })
  add("progress bar", "lantern.utils", getmetatable(bar), methods())
  return out
end

local model   -- LDoc's model of the reference: the pages with their items and texts

local function ldoc_model()
  if model then return model end
  assert(os.execute("command -v ldoc > /dev/null"),
    "LDoc is missing (make setup installs Debian's lua-ldoc)")
  local dump = os.tmpname()
  -- LD_PRELOAD: under the sanitizer build the preloaded runtime would make LDoc's Lua report
  -- its own leaks
  local ok = os.execute(string.format(
    "env -u LD_PRELOAD DOCS_DUMP=%s LUA_PATH=%s ldoc -c config.ld --filter docs_ldoc_filter.dump . " ..
    "> /dev/null 2>&1", shq(dump), shq("spec/?.lua;;")))
  assert(ok, "ldoc --filter failed")
  model = dofile(dump)
  os.remove(dump)
  return model
end

local function page_index(m)
  local pages = {}
  for _, p in ipairs(m) do
    local names, spans = {}, {}
    local function scan(text)
      for span in text:gmatch("`([^`]+)`") do spans[#spans + 1] = span end
    end
    scan(p.text)
    for _, it in ipairs(p.items) do
      names[it.name:match("([%w_]+)$") or it.name] = true
      scan(it.text)
    end
    pages[p.name] = { names = names, spans = spans, items = p.items }
  end
  return pages
end

-- A name is documented on its page by an entry of that name (`lt.zeros`, `Module:train`,
-- `Conv2d`) or by a mention in code, qualified, called or indexed (`lt.ones`, `x:add_`,
-- `nn.init.normal`, `zeros_like(`, `x["repeat"]`), in the text of an entry.
local function documented(page, short)
  if not page then return false end
  if page.names[short] then return true end
  local esc = short:gsub("%p", "%%%0")
  for _, span in ipairs(page.spans) do
    if span:find("[%.:]" .. esc .. "%f[^%w_]") or span:find("%f[%w_]" .. esc .. "%(")
        or span:find('["' .. esc .. '"]', 1, true) then
      return true
    end
  end
  return false
end

describe("the reference docs", function()
  it("have an entry for every exported name", function()
    local pages = page_index(ldoc_model())
    local missing = {}
    local n = 0
    for _, e in ipairs(exported()) do
      n = n + 1
      local ok = documented(pages[e.page], e.short)
      -- a Tensor method that is also a function of lt is documented with the function, as the
      -- Tensor page says
      if not ok and e.page == "lantern.Tensor" and rawget(lt, e.short) then
        ok = documented(pages["lantern"], e.short)
      end
      if not ok then missing[#missing + 1] = e.name .. " (on " .. e.page .. ")" end
    end
    assert.is_true(n > 700, "only " .. n .. " exported names found")
    assert.are.equal("", table.concat(missing, "\n"))
  end)

  it("document no internal name and have no page for internal modules", function()
    local m = ldoc_model()
    local bad = {}
    for _, p in ipairs(m) do
      if p.type ~= "topic" then
        if not p.name:match("^lantern") or p.name == "lantern.options" or p.name == "lantern.ordered"
            or p.name == "lantern.optim.check" or p.name == "lantern.print" then
          bad[#bad + 1] = "page " .. p.name
        end
        for _, it in ipairs(p.items) do
          local short = it.name:match("([%w_]+)$") or it.name
          if short:match("^_[^_]") then bad[#bad + 1] = p.name .. ": " .. it.name end
        end
      end
    end
    -- an internal name has no entry of its own (ModuleDict:keys is not nn.keys)
    local full = {}
    for _, p in ipairs(m) do
      for _, it in ipairs(p.items) do full[p.name .. " " .. it.name] = true end
    end
    for name in pairs(INTERNAL) do
      local page = name:match("^nn") and "lantern.nn" or "lantern.optim"
      local item = name:gsub("^nn%.", ""):gsub("^optim%.", ""):gsub("%.([%w_]+)$", ":%1")
      if full[page .. " " .. item] or full[page .. " " .. name:match("([%w_]+)$")] then
        bad[#bad + 1] = page .. ": " .. name
      end
    end
    assert.are.equal("", table.concat(bad, "\n"))
  end)

  it("build without LDoc warnings", function()
    ldoc_model()
    local dir = os.tmpname()
    os.remove(dir)
    local err = os.tmpname()
    local ok = os.execute(string.format("env -u LD_PRELOAD ldoc -c config.ld -d %s . > /dev/null 2> %s",
      shq(dir), shq(err)))
    local text = readfile(err)
    os.remove(err)
    local index = io.open(dir .. "/index.html")
    if index then index:close() end
    os.execute("rm -rf " .. shq(dir))
    assert.is_true(ok == true, "ldoc failed: " .. text)
    assert.are.equal("", text)
    assert.truthy(index, "ldoc wrote no index.html")
  end)

  it("give the session's help() the text of every exported function and class", function()
    local help = require "lantern.help"
    local missing = {}
    for _, e in ipairs(exported()) do
      local v = e.value
      local class = type(v) == "table" and rawget(v, "__name") and not e.short:match("_mt$")
      if not e.protocol and (type(v) == "function" or class) then
        local text = help.text(v)
        if text:find("no reference text", 1, true) then missing[#missing + 1] = e.name .. ": " .. text end
      end
    end
    assert.are.equal("", table.concat(missing, "\n"))
  end)
end)
