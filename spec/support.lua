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

--- The ISA levels this CPU (and OS) can run, as LANTERN_ISA names them: { sse4 = true,
-- avx2 = bool, avx512 = bool }, from the flags line of /proc/cpuinfo.
function support.isa_levels()
  local flags = {}
  for w in ((support.readfile("/proc/cpuinfo") or ""):match("\nflags%s*:([^\n]*)") or ""):gmatch("%S+") do
    flags[w] = true
  end
  local avx2 = flags.avx2 and flags.fma or false
  return { sse4 = true, avx2 = avx2,
    avx512 = avx2 and flags.avx512f and flags.avx512bw and flags.avx512dq and flags.avx512vl or false }
end

--- Runs Lua source in a child `bin/lantern` (env: a prefix such as "LANTERN_ISA=avx2", args:
-- the script's arguments); returns what it printed on stdout and on stderr.
function support.run_lua(src, env, args)
  local script, errf = os.tmpname(), os.tmpname()
  support.writefile(script, src)
  local out = support.sh(string.format("%s bin/lantern %s %s 2>%s", env or "", script, args or "", errf))
  local err = support.readfile(errf)
  os.remove(script)
  os.remove(errf)
  return out, err
end

-- Raises unless the lists got and want have the same length and every element of got is
-- within tol * (1 + |want|) of want's (`what` names the check in the message).
function support.close_list(got, want, tol, what)
  if #got ~= #want then   -- plain errors: a required module does not see busted's assert
    error(string.format("%s: element count %d, expected %d", what, #got, #want), 2)
  end
  for i = 1, #want do
    if math.abs(got[i] - want[i]) > tol * (1 + math.abs(want[i])) then
      error(string.format("%s: element %d is %.17g, expected %.17g", what, i, got[i], want[i]), 2)
    end
  end
end

--- The largest |got - want| over the largest |want| (1 where want is all zeros): float32 sums of
-- a few hundred products against float64 stay well under 1e-5 of the output's scale.
function support.rel_err(got, want)
  local scale = want:abs():max():item()
  return (got:double() - want):abs():max():item() / (scale > 0 and scale or 1)
end

return support
