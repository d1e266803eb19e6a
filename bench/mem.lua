-- The memory table of `make bench`: peak RSS of three training loops (bench/mem/mlp.lua,
-- cnn.lua, gpt.lua) beside PyTorch running the same loops (bench/mem/torch_mem.py), each loop
-- in a fresh process: Lantern's with bin/lantern (stock lua5.4, its collector as the
-- interpreter sets it up), PyTorch's with /usr/bin/python3, both with the same thread count.
--   bin/lantern bench/mem.lua [threads=2] [loops...]     (loops: mlp cnn gpt; default all)
-- Each child prints one `mem loop=... key=value ...` record (bench/mem/harness.lua lists the
-- fields); they are echoed to stderr and summarised as a table on stdout. Ratios > 1: Lantern
-- is better (memory and step time: pytorch / lantern).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local root = here .. "../"

local threads = tonumber(arg[1]) or 2
local wanted = {}
for i = 2, #arg do wanted[arg[i]] = true end

local LOOPS = {
  { name = "mlp", label = "MLP 784-512-512-10, batch 128, Adam" },
  { name = "cnn", label = "demo CNN, batch 64, Adam" },
  { name = "gpt", label = "GPT 2 layers, d 128, 4 heads, T 64, batch 16, AdamW" },
}

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs cmd, echoes its output to stderr and returns the fields of its `mem ` record (or nil).
local function record(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local rec
  for line in p:lines() do
    io.stderr:write("  ", line, "\n")
    if line:match("^mem ") then
      rec = {}
      for k, v in line:gmatch("(%S+)=(%S+)") do rec[k] = tonumber(v) or v end
    end
  end
  local ok, how, code = p:close()
  if not ok then io.stderr:write(string.format("  (exited: %s %s)\n", how, code)) end
  return rec
end

local has_torch = os.execute("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1")
if not has_torch then io.stderr:write("PyTorch not found: its columns stay empty\n") end

local rows = {}
for _, loop in ipairs(LOOPS) do
  if next(wanted) == nil or wanted[loop.name] then
    io.stderr:write(string.format("memory: %s (%d threads)\n", loop.name, threads))
    local lt_rec = record(string.format("%s %s %d", sh_quote(root .. "bin/lantern"),
      sh_quote(root .. "bench/mem/" .. loop.name .. ".lua"), threads))
    local pt_rec = has_torch and record(string.format("/usr/bin/python3 %s %s %d",
      sh_quote(root .. "bench/mem/torch_mem.py"), loop.name, threads)) or nil
    rows[#rows + 1] = { loop = loop, lt = lt_rec, pt = pt_rec }
  end
end

local function mb(v) return v and string.format("%.1f MB", v) or "-" end
local function growth(r)
  if not r then return "-" end
  local d = r.rss_late_mb - r.rss_early_mb
  return string.format("%+.1f MB (%.1f → %.1f)", d, r.rss_early_mb, r.rss_late_mb)
end
local function ratio(pt, lt) return (pt and lt) and string.format("%.2fx", pt / lt) or "-" end

print(string.format("\nPeak RSS of training loops, Lantern vs PyTorch, %d thread(s), each loop in a " ..
  "fresh process (VmHWM at the end; growth: VmRSS after step 10 vs after the last step)", threads))
print("| loop | steps (early→last) | Lantern peak RSS | PyTorch peak RSS | ratio | Lantern RSS growth early→late step |" ..
  " PyTorch RSS growth | Lantern step | PyTorch step | step ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for _, r in ipairs(rows) do
  local l, p = r.lt or {}, r.pt or {}
  local steps = l.steps or p.steps
  print(string.format("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", r.loop.label,
    steps and string.format("%d→%d", l.early_step or p.early_step, steps) or "-",
    r.lt and mb(l.peak_mb) or "failed", r.pt and mb(p.peak_mb) or (has_torch and "failed" or "-"),
    ratio(p.peak_mb, l.peak_mb), growth(r.lt), growth(r.pt),
    l.step_ms and string.format("%.2f ms", l.step_ms) or "-",
    p.step_ms and string.format("%.2f ms", p.step_ms) or "-", ratio(p.step_ms, l.step_ms)))
end
-- what the processes held before building a model, and the losses (random data: both sides
-- should start near ln(classes) and stay there)
for _, r in ipairs(rows) do
  local l, p = r.lt or {}, r.pt or {}
  print(string.format("  %s: RSS after loading Lantern %s, PyTorch %s; loss first→last Lantern %s, " ..
    "PyTorch %s; Lua heap at the end %s", r.loop.name, mb(l.base_mb), mb(p.base_mb),
    l.loss_first and string.format("%.4f→%.4f", l.loss_first, l.loss_last) or "-",
    p.loss_first and string.format("%.4f→%.4f", p.loss_first, p.loss_last) or "-", mb(l.lua_mb)))
end
print("ratio > 1: Lantern is better (peak RSS and step time: pytorch / lantern); step: median " ..
  "of the second half of the steps")
