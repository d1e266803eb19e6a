--- Reference text in the session: `help(lt.zeros)`, `?lt.zeros`, `help(lt.nn)`, `help(x)`.
-- The text is that of the `---` doc comments `make docs` renders with LDoc, extracted when
-- Lantern is built (tools/gen_help.lua) and compiled into the library, so it is there with
-- the installed module or `liblantern.a` alone. A Lua function is found by the line that
-- defines it, a function written in C by its name in `lt`, `lt.Tensor` or a submodule.
-- @module lantern.help
local M = {}

local cache

-- The generated table; the copy compiled into lantern.core first, since it was made from the
-- same sources as the library that runs.
local function data()
  if cache then return cache end
  local d
  local okc, core = pcall(require, "lantern.core")
  local src = okc and type(core) == "table" and core._embedded_source
    and core._embedded_source("lantern.helpdata")
  if src then
    local f = load(src, "=lantern.helpdata", "t", {})
    local ok, v = pcall(f)
    if ok then d = v end
  end
  if type(d) ~= "table" then
    local ok, v = pcall(require, "lantern.helpdata")
    if ok and type(v) == "table" then d = v end
  end
  cache = d or { entries = {}, names = {}, lines = {}, locals = {}, modules = {} }
  return cache
end

-- Module name of a chunk: files as `require` finds them, chunks compiled into the library.
local function source_module(src)
  local rel = src:match("^@.*/(lantern/.+)%.lua$") or src:match("^@(lantern/.+)%.lua$")
  if rel then return (rel:gsub("/init$", ""):gsub("/", ".")) end
  if src:match("^lantern[%w_%.]*$") then return src end
  return nil
end

local function is_tensor(v)
  local lt = package.loaded["lantern"]
  return type(v) == "userdata" and type(lt) == "table" and type(rawget(lt, "is_tensor")) == "function"
    and lt.is_tensor(v)
end

-- Every loaded lantern table with the names that reach it, and the names of their fields
-- (one level into classes too): value -> list of qualified names, shortest first.
local function runtime_names()
  local names = {}
  local function add(v, n)
    local l = names[v]
    if not l then l = {}; names[v] = l end
    l[#l + 1] = n
  end
  local roots = {}
  for name, mod in pairs(package.loaded) do
    if type(name) == "string" and (name == "lantern" or name:sub(1, 8) == "lantern.")
      and type(mod) == "table" and name ~= "lantern.helpdata" then
      roots[#roots + 1] = { name, mod }
    end
  end
  local lt = package.loaded["lantern"]
  if type(lt) == "table" and type(rawget(lt, "Tensor")) == "table" then
    roots[#roots + 1] = { "lantern.Tensor", rawget(lt, "Tensor") }
  end
  table.sort(roots, function(a, b) return a[1] < b[1] end)
  for _, r in ipairs(roots) do
    add(r[2], r[1])
    for k, v in next, r[2] do
      if type(k) == "string" then
        add(v, r[1] .. "." .. k)
        if type(v) == "table" and type(rawget(v, "__name")) == "string" then
          for k2, v2 in next, v do
            if type(k2) == "string" and type(v2) == "function" then add(v2, r[1] .. "." .. k .. "." .. k2) end
          end
        end
      end
    end
  end
  for _, l in pairs(names) do
    table.sort(l, function(a, b) if #a ~= #b then return #a < #b end return a < b end)
  end
  return names
end

local function display(name)
  return (name:gsub("^lantern%.nn%.functional%.", "F."):gsub("^lantern%.Tensor%.", "Tensor:")
    :gsub("^lantern", "lt"))
end

local function entry_text(d, idx) return d.entries[idx].text end

-- The documented members of a module, as their titles' names.
local function members(d, mod)
  local list = {}
  for _, idx in ipairs(d.modules[mod] or {}) do
    local e = d.entries[idx]
    if e.title ~= mod then list[#list + 1] = e.title:match("^[^(]*") end
  end
  return list
end

local function wrap(words, indent, width)
  local lines, cur = {}, indent
  for _, w in ipairs(words) do
    if #cur + #w + 2 > width and cur ~= indent then
      lines[#lines + 1] = cur
      cur = indent
    end
    cur = cur .. (cur == indent and "" or ", ") .. w
  end
  if cur ~= indent then lines[#lines + 1] = cur end
  return table.concat(lines, ",\n")
end

local function module_text(d, mod, idx)
  local parts = {}
  if idx then parts[1] = entry_text(d, idx) end
  -- `lantern` is documented by lantern/init.lua and by the stubs of the C functions
  for i, e in ipairs(d.entries) do
    if e.title == mod and i ~= idx then parts[#parts + 1] = e.text:gsub("^[^\n]*\n", "") end
  end
  local m = members(d, mod)
  if #m > 0 then parts[#parts + 1] = "Documented here (help(name) for each):\n" .. wrap(m, "  ", 92) end
  return table.concat(parts, "\n")
end

-- Signature and place of a function without reference text.
local function undocumented(f, name)
  local info = debug.getinfo(f, "Su")
  local label = name and display(name) or tostring(f)
  if info.what ~= "Lua" then
    return label .. ": a function written in C, with no reference text (try `make docs`)"
  end
  local params = {}
  for i = 1, info.nparams do params[i] = debug.getlocal(f, i) end
  if info.isvararg then params[#params + 1] = "..." end
  return string.format("%s(%s): no reference text; defined at %s:%d", label,
    table.concat(params, ", "), info.short_src, info.linedefined)
end

-- An entry that names the function among others ("Also `lt.ones`"), for those documented
-- together with a sibling.
local function mentioned(d, names)
  for _, n in ipairs(names) do
    local short, full = n:match("([%w_]+)$"), display(n)
    local pats = { "`" .. full .. "`", "`" .. full .. "(", "`x:" .. short .. "`", "`x:" .. short .. "(" }
    for i, e in ipairs(d.entries) do
      for _, p in ipairs(pats) do
        if e.title ~= e.module and e.text:find(p, 1, true) then return i end
      end
    end
  end
end

local function function_text(d, f)
  local idx
  local info = debug.getinfo(f, "S")
  if info.what == "Lua" then
    local mod = source_module(info.source)
    if mod then idx = d.lines[mod .. ":" .. info.linedefined] end
  end
  local rn = runtime_names()[f] or {}
  if not idx then
    for _, n in ipairs(rn) do
      -- a method without its own text is the function of the same name (x:add is lt.add)
      idx = d.names[n] or d.names[n:gsub("^lantern%.Tensor%.", "lantern.")]
      if idx then break end
    end
  end
  if idx then return entry_text(d, idx) end
  local m = mentioned(d, rn)
  if m then
    return display(rn[1]) .. " is documented with " .. d.entries[m].title:match("^[^(]*") ..
      ":\n\n" .. entry_text(d, m)
  end
  return undocumented(f, rn[1])
end

local function class_text(d, cls, names)
  local name = rawget(cls, "__name")
  -- the class's own doc comment, found in the file that defines its methods
  for _, k in ipairs { "__init", "new", "forward", "step", "get", "len", "iter" } do
    local fn = rawget(cls, k)
    if type(fn) == "function" then
      local info = debug.getinfo(fn, "S")
      local mod = info.what == "Lua" and source_module(info.source)
      if mod and d.locals[mod .. "#" .. name] then return entry_text(d, d.locals[mod .. "#" .. name]) end
    end
  end
  for _, n in ipairs(names or {}) do
    if d.names[n] then return entry_text(d, d.names[n]) end
  end
  local methods = {}
  local seen = {}
  local c, depth = cls, 0
  while type(c) == "table" and depth < 6 do
    for k, v in next, c do
      if type(k) == "string" and type(v) == "function" and not seen[k] and k:sub(1, 1) ~= "_" then
        seen[k] = true
        methods[#methods + 1] = k
      end
    end
    c, depth = rawget(c, "super") or rawget(c, "__base"), depth + 1
  end
  table.sort(methods)
  local out = { string.format("%s: a class (%s), with no reference text of its own",
    names and names[1] and display(names[1]) or name, name) }
  local init = rawget(cls, "__init")
  if type(init) == "function" then
    local info = debug.getinfo(init, "Su")
    local params = {}
    for i = 2, info.nparams do params[#params + 1] = debug.getlocal(init, i) end
    if info.isvararg then params[#params + 1] = "..." end
    out[#out + 1] = string.format("Constructor: %s(%s), defined at %s:%d", name,
      table.concat(params, ", "), info.short_src, info.linedefined)
  end
  if #methods > 0 then out[#out + 1] = "Methods:\n" .. wrap(methods, "  ", 92) end
  return table.concat(out, "\n")
end

-- A class that is loaded under `name` (the __name of an instance's class).
local function find_class(name, names)
  for v, ns in pairs(names) do
    if type(v) == "table" and rawget(v, "__name") == name then
      for _, n in ipairs(ns) do
        if n:match("%.([%w_]+)$") == name then return v, ns end
      end
    end
  end
end

local USAGE = [[
help(x) shows the reference text of a function, module or class (from the doc comments that
`make docs` turns into docs/api/index.html):
  help(lt.zeros)          a function: what it does, its parameters, what it returns, usage
  ?lt.zeros               the same, typed at the prompt
  help(lt.nn)             a module: its text and the names documented in it
  help(x)                 a tensor: the Tensor class (help(x.view) for one method)
  help(net)               a model or other object: its class
  help("narrow")          by name, also for names not loaded yet
At the prompt, `:time` switches a timer of each statement on and off.]]

local function by_name(d, s)
  local q = s:gsub(":", ".")
  local tries = { q, "lantern." .. q, (q:gsub("^lt%.", "lantern.")), (q:gsub("^nn%.", "lantern.nn.")),
    (q:gsub("^F%.", "lantern.nn.functional.")), (q:gsub("^optim%.", "lantern.optim.")),
    (q:gsub("^x%.", "lantern.Tensor.")), (q:gsub("^Tensor%.", "lantern.Tensor.")) }
  for _, t in ipairs(tries) do
    if d.modules[t] and d.names[t] then return module_text(d, t, d.names[t]) end
    if d.names[t] then return entry_text(d, d.names[t]) end
  end
  local found = {}
  for n in pairs(d.names) do
    if n:sub(-#q - 1) == "." .. q then found[#found + 1] = n end
  end
  table.sort(found)
  if #found == 0 and q:match("^[%w_]+$") then
    local m = mentioned(d, { "lantern." .. q, "lantern.Tensor." .. q })
    if m then
      return s .. " is documented with " .. d.entries[m].title:match("^[^(]*") .. ":\n\n" ..
        entry_text(d, m)
    end
  end
  if #found == 0 then
    return string.format("no reference text for '%s' (help() says how to look things up)", s)
  end
  local text = entry_text(d, d.names[found[1]])
  if #found > 1 then
    local others = {}
    for i = 2, #found do others[#others + 1] = display(found[i]) end
    text = text .. "\nAlso documented under that name: " .. table.concat(others, ", ")
  end
  return text
end

--- The reference text for `v`: a function, module, class, object, tensor or a name (string);
-- with no argument, how to use help.
-- @param[opt] v the thing to explain
-- @treturn string
function M.text(...)
  if select("#", ...) == 0 then return USAGE end
  local v = ...
  local d = data()
  if type(v) == "string" then return by_name(d, v) end
  if type(v) == "function" then return function_text(d, v) end
  if is_tensor(v) then return module_text(d, "lantern.Tensor", d.names["lantern.Tensor"]) end
  if type(v) == "table" then
    local names = runtime_names()
    local ns = names[v]
    if ns then
      for _, n in ipairs(ns) do
        if package.loaded[n] == v or n == "lantern.Tensor" then return module_text(d, n, d.names[n]) end
      end
    end
    local name = rawget(v, "__name")
    if type(name) == "string" then return class_text(d, v, ns) end
    -- an instance: the class is its metatable, or what `__name` leads to (nn.Module)
    local ok, iname = pcall(function() return v.__name end)
    if ok and type(iname) == "string" then
      local cls, cns = find_class(iname, names)
      if cls then return class_text(d, cls, cns) end
      local mt = getmetatable(v)
      if type(mt) == "table" and rawget(mt, "__name") == iname then return class_text(d, mt, names[mt]) end
    end
    return "a table with no reference text (help() says what help knows)"
  end
  if v == nil then return "help: nil has no reference text (misspelt name?); help() says how to use help" end
  return string.format("help: a %s value has no reference text; help() says how to use help", type(v))
end

--- Prints the reference text for `v` (see `text`).
function M.help(...)
  io.stdout:write(M.text(...), "\n")
  io.stdout:flush()
end

return M
