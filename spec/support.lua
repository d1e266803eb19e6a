-- Helpers shared by specs.
local support = {}

--- Resident set size of this process in KiB (Linux).
function support.rss_kb()
  local f = assert(io.open("/proc/self/statm"))
  local _, res = f:read("n", "n")
  f:close()
  return res * 4
end

--- Raises unless fn raises an error whose message contains every one of the texts; returns the
-- message.
function support.expect_error(fn, ...)
  local texts = { ... }
  local ok, err = pcall(fn)
  -- plain error, not luassert: a required module does not see busted's assert
  if ok then error("expected an error containing: " .. table.concat(texts, " / "), 2) end
  err = tostring(err)
  for _, text in ipairs(texts) do
    if not err:find(text, 1, true) then
      error("error message\n  " .. err .. "\ndoes not contain\n  " .. text, 2)
    end
  end
  return err
end

--- The contents of a file, or nil when it cannot be opened.
function support.readfile(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function support.writefile(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

--- A string quoted for the shell.
function support.shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- What a shell command printed on stdout.
function support.sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

return support
