-- Turns the Lua half of Lantern into a C array of (module name, source) pairs, so that the
-- static library can preload it (lantern_open) with no files on disk.
local function cstring(s)
  local parts = { '"' }
  for i = 1, #s do
    local b = s:byte(i)
    if b == 10 then
      parts[#parts + 1] = '\\n"\n"'
    elseif b == 34 or b == 92 then
      parts[#parts + 1] = "\\" .. string.char(b)
    elseif b < 32 or b > 126 or b == 63 then   -- '?' too: no trigraphs
      parts[#parts + 1] = string.format("\\%03o", b)
    else
      parts[#parts + 1] = string.char(b)
    end
  end
  parts[#parts + 1] = '"'
  return table.concat(parts)
end

local out = { "#include <stddef.h>", "const char *const lantern_lua_sources[] = {" }
-- an argument NAME=PATH embeds a generated file (outside lua/) under module name NAME
for _, a in ipairs(arg) do
  local mod, path = a:match("^([%w_%.]+)=(.+)$")
  path = path or a
  local f = assert(io.open(path, "rb"))
  local src = f:read("a")
  f:close()
  mod = mod or path:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
  out[#out + 1] = string.format("  %s,\n  %s,", cstring(mod), cstring(src))
end
out[#out + 1] = "  NULL, NULL\n};"
io.write(table.concat(out, "\n"), "\n")
