-- LDoc filter for spec/docs_spec.lua: `ldoc -c config.ld --filter docs_ldoc_filter.dump .`
-- hands LDoc's model of the reference (what `make docs` renders) to dump, which writes it as
-- a Lua chunk: a list of pages {name =, text =, items = {{name =, type =, text =}, ...}}, into
-- the file named by the environment's DOCS_DUMP (LDoc prints its own notes on stdout).
-- It runs inside LDoc, under whichever Lua LDoc uses (5.1 on Debian), so it keeps to what
-- every Lua version has.
local M = {}

local function add(parts, v)
  if type(v) == "string" then
    parts[#parts + 1] = v
  elseif type(v) == "table" then
    for _, x in ipairs(v) do add(parts, x) end
  end
end

-- The text LDoc shows for an item: summary, description, parameter and return notes, usage.
local function item_text(item)
  local parts = {}
  add(parts, item.summary)
  add(parts, item.description)
  if type(item.params) == "table" and type(item.params.map) == "table" then
    for _, name in ipairs(item.params) do add(parts, item.params.map[name]) end
  end
  if type(item.retgroups) == "table" then
    for _, group in ipairs(item.retgroups) do
      for _, r in ipairs(group) do add(parts, r.text) end
    end
  end
  add(parts, item.usage)
  if type(item.tags) == "table" then
    add(parts, item.tags.usage)
    add(parts, item.tags.field)
  end
  return table.concat(parts, "\n")
end

function M.dump(module_list)
  local out = { "return {" }
  for _, mod in ipairs(module_list) do
    out[#out + 1] = string.format("{name = %q, type = %q, text = %q, items = {", mod.name,
      tostring(mod.type), item_text(mod))
    for _, item in ipairs(mod.items) do
      out[#out + 1] = string.format("{name = %q, type = %q, text = %q},", tostring(item.name),
        tostring(item.type), item_text(item))
    end
    -- a class (@type) is a section of its module, not one of its items
    for _, sec in ipairs(mod.sections or {}) do
      out[#out + 1] = string.format("{name = %q, type = %q, text = %q},", tostring(sec.name),
        tostring(sec.type), item_text(sec))
    end
    out[#out + 1] = "}},"
  end
  out[#out + 1] = "}"
  local f = assert(io.open(assert(os.getenv("DOCS_DUMP"), "DOCS_DUMP is not set"), "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
end

return M
