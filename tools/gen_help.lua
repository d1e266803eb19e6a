-- Extracts the `---` doc comments that LDoc reads (config.ld) into a Lua module, so that the
-- session's help() shows the reference text without the sources or LDoc at hand: the module
-- is compiled into the library with the Lua half (tools/embed_lua.lua).
--   lua5.4 tools/gen_help.lua lua/lantern/*.lua ... docs/api_*.lua > helpdata.lua
-- The module returns
--   entries  list of {title =, text =, module =}
--   names    qualified name ("lantern.zeros", "lantern.Tensor.size") -> entry index
--   lines    "module:line" of a function's definition -> entry index (debug.getinfo finds it)
--   locals   "module#Name" of a documented local value (a class table) -> entry index
--   modules  module name ("lantern.nn", "lantern.Tensor") -> list of entry indices

local TYPE_TAGS = { int = "int", number = "number", string = "string", bool = "boolean",
  tab = "table", func = "function" }

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- module name of a file as `require` names it: lua/lantern/nn/init.lua -> lantern.nn
local function path_module(path)
  local rel = path:match("^lua/(.+)%.lua$") or path:match("([^/]+)%.lua$")
  return (rel:gsub("/init$", ""):gsub("/", "."))
end

-- The comment lines of a block without their dashes, keeping indentation after the first
-- space (lists and code in usage).
local function strip(line)
  return (line:gsub("^%s*%-%-%-?", ""):gsub("^ ", ""))
end

local function parse_block(lines)
  local desc, tags, cur = {}, {}, nil
  for _, raw in ipairs(lines) do
    local line = strip(raw)
    local tag, rest = line:match("^%s*@([%w_]+%b[])%s*(.*)$")
    if not tag then tag, rest = line:match("^%s*@([%w_]+)%s*(.*)$") end
    if tag then
      cur = { tag = tag, lines = { rest } }
      tags[#tags + 1] = cur
    elseif cur then
      cur.lines[#cur.lines + 1] = line
    else
      desc[#desc + 1] = line
    end
  end
  while #desc > 0 and desc[#desc]:match("^%s*$") do desc[#desc] = nil end
  return desc, tags
end

local function render(title, desc, tags)
  local out = { title }
  for _, l in ipairs(desc) do out[#out + 1] = l end
  local params, returns, usage, other = {}, {}, {}, {}
  for _, t in ipairs(tags) do
    local name, opt = t.tag:match("^([%w_]+)(.*)$")
    local first = t.lines[1]
    local more = table.concat(t.lines, " ", 2)
    local optional = opt:match("^%[opt") and (opt:match("=([^%]]*)") and
      ("optional, default " .. opt:match("=([^%]]*)")) or "optional") or nil
    if name == "param" or name == "tparam" or TYPE_TAGS[name] then
      local ty, pname, pdesc
      if name == "param" then
        pname, pdesc = first:match("^(%S+)%s*(.*)$")
      elseif name == "tparam" then
        ty, pname, pdesc = first:match("^(%S+)%s+(%S+)%s*(.*)$")
      else
        ty = TYPE_TAGS[name]
        pname, pdesc = first:match("^(%S+)%s*(.*)$")
      end
      if pname then
        local notes = {}
        if ty then notes[#notes + 1] = ty end
        if optional then notes[#notes + 1] = optional end
        local d = trim((pdesc or "") .. " " .. more)
        if #notes > 0 then d = "(" .. table.concat(notes, ", ") .. ")" .. (d ~= "" and " " .. d or "") end
        params[#params + 1] = { pname, d }
      end
    elseif name == "return" or name == "treturn" then
      returns[#returns + 1] = trim(first .. " " .. more)
    elseif name == "usage" then
      for i, l in ipairs(t.lines) do
        if i > 1 or l ~= "" then usage[#usage + 1] = l end
      end
    elseif name == "raise" or name == "see" or name == "field" then
      other[#other + 1] = (name == "raise" and "Raises: " or name == "see" and "See: " or "Field: ")
        .. trim(first .. " " .. more)
    end
  end
  if #params > 0 then
    out[#out + 1] = "Parameters:"
    local w = 0
    for _, p in ipairs(params) do w = math.max(w, #p[1]) end
    for _, p in ipairs(params) do
      out[#out + 1] = "  " .. p[1] .. string.rep(" ", w - #p[1] + 2) .. p[2]
    end
  end
  if #returns > 0 then
    out[#out + 1] = "Returns:"
    for _, r in ipairs(returns) do out[#out + 1] = "  " .. r end
  end
  if #usage > 0 then
    out[#out + 1] = "Usage:"
    for _, u in ipairs(usage) do out[#out + 1] = "  " .. u end
  end
  for _, o in ipairs(other) do out[#out + 1] = o end
  return table.concat(out, "\n")
end

local entries, names, lines_idx, locals, modules = {}, {}, {}, {}, {}

local function add_entry(e, module)
  entries[#entries + 1] = e
  modules[module] = modules[module] or {}
  table.insert(modules[module], #entries)
  return #entries
end

local function process(path)
  local f = assert(io.open(path, "r"))
  local src = {}
  for l in f:lines() do src[#src + 1] = l end
  f:close()

  local file_mod = path_module(path)
  local doc_mod, alias, classmod
  local ret = nil   -- the local returned at the end: the module's own table
  for i = #src, 1, -1 do
    local r = src[i]:match("^return%s+([%a_][%w_]*)%s*$")
    if r then ret = r; break end
    if src[i]:match("%S") and not src[i]:match("^%s*%-%-") then break end
  end
  local blocks = {}
  local i = 1
  while i <= #src do
    if src[i]:match("^%s*%-%-%-%s") or src[i]:match("^%s*%-%-%-$") then
      local b = { first = i, lines = {} }
      while i <= #src and src[i]:match("^%s*%-%-") do
        b.lines[#b.lines + 1] = src[i]
        i = i + 1
      end
      b.def_line = i
      b.def = src[i]
      blocks[#blocks + 1] = b
    else
      i = i + 1
    end
  end
  -- the module tags first: the other blocks' names depend on them
  for _, b in ipairs(blocks) do
    for _, l in ipairs(b.lines) do
      local m = l:match("@module%s+([%w_%.]+)")
      local c = l:match("@classmod%s+([%w_%.]+)")
      local a = l:match("@alias%s+([%w_]+)")
      if m or c then doc_mod, b.is_module = m or c, true end
      if c then classmod = c end
      if a then alias = a end
    end
  end
  doc_mod = doc_mod or file_mod
  local mod_local = {}
  if alias then mod_local[alias] = true end
  if ret then mod_local[ret] = true end
  mod_local.M = true
  if not classmod then mod_local[doc_mod:match("([%w_]+)$")] = true end
  local display_mod = doc_mod:gsub("^lantern", "lt")

  for _, b in ipairs(blocks) do
    local desc, tags = parse_block(b.lines)
    local section, fname = false, nil
    for _, t in ipairs(tags) do
      if t.tag == "section" or t.tag == "local" then section = true end
      if t.tag == "function" then fname = trim(t.lines[1]) end
    end
    local def = b.def or ""
    if b.is_module then
      local idx = add_entry({ title = doc_mod, text = render(doc_mod, desc, tags), module = doc_mod },
        doc_mod)
      names[doc_mod] = names[doc_mod] or idx
    elseif not section and (fname or def:match("%S")) then
      local name, args, is_fn
      if fname then
        name, args, is_fn = fname, nil, true
      else
        name, args = def:match("^%s*function%s+([%w_%.:]+)%s*(%b())")
        if not name then name, args = def:match("^%s*local%s+function%s+([%w_]+)%s*(%b())") end
        if not name then
          name, args = def:match("^%s*([%w_%.]+)%s*=%s*function%s*(%b())")
          if not name then name, args = def:match("^%s*local%s+([%w_]+)%s*=%s*function%s*(%b())") end
        end
        is_fn = name ~= nil
        if not name then
          name = def:match("^%s*local%s+([%w_]+)%s*=") or def:match("^%s*([%w_%.]+)%s*=")
        end
      end
      if name then
        local head, rest = name:match("^([%w_]+)[%.:](.+)$")
        local qualified, title
        if classmod and (head == classmod:match("([%w_]+)$")) then
          qualified = classmod .. "." .. rest:gsub(":", ".")
          title = name
        elseif head and mod_local[head] then
          qualified = doc_mod .. "." .. rest:gsub(":", ".")
          title = display_mod .. "." .. rest
        elseif head then
          qualified = doc_mod .. "." .. name:gsub(":", ".")
          title = name
        else
          qualified = doc_mod .. "." .. name
          title = is_fn and name or (display_mod .. "." .. name)
        end
        if is_fn and args then title = title .. args end
        local idx = add_entry({ title = title, text = render(title, desc, tags), module = doc_mod },
          doc_mod)
        names[qualified] = names[qualified] or idx
        if is_fn and not fname then lines_idx[file_mod .. ":" .. b.def_line] = idx end
        if not head and not is_fn then locals[file_mod .. "#" .. name] = idx end
      end
    end
  end
end

for _, path in ipairs(arg) do process(path) end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

local out = { "-- Generated by tools/gen_help.lua from the doc comments; do not edit.", "return {",
  "entries = {" }
for _, e in ipairs(entries) do
  out[#out + 1] = string.format("{title = %q, module = %q, text = %q},", e.title, e.module, e.text)
end
out[#out + 1] = "},"
for _, part in ipairs { { "names", names }, { "lines", lines_idx }, { "locals", locals } } do
  out[#out + 1] = part[1] .. " = {"
  for _, k in ipairs(sorted_keys(part[2])) do
    out[#out + 1] = string.format("[%q] = %d,", k, part[2][k])
  end
  out[#out + 1] = "},"
end
out[#out + 1] = "modules = {"
for _, k in ipairs(sorted_keys(modules)) do
  out[#out + 1] = string.format("[%q] = {%s},", k, table.concat(modules[k], ", "))
end
out[#out + 1] = "},"
out[#out + 1] = "}"
io.write(table.concat(out, "\n"), "\n")
