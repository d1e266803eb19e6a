-- lt.distributed, nn.parallel.DistributedDataParallel and data.DistributedSampler. The MPI
-- parts run in worker scripts (spec/dist/*.lua) under `mpirun -np 2`, each bounded by a timeout;
-- MPI never starts in this process (MPI_Init may run once per process, and under the sanitizer
-- build Open MPI's own allocations would count as this process's leaks). The workers write
-- their results (spec/dist/common.lua) and the checks are here.
local lt = require "lantern"
local support = require "support"
local shq, expect_error = support.shq, support.expect_error

local ROOT = support.sh("pwd"):gsub("%s+$", "")
local TIMEOUT_S = 120
local HAVE_MPIRUN = os.execute("command -v mpirun > /dev/null 2>&1") == true
local NO_MPIRUN = "mpirun is missing (make setup installs Debian's openmpi-bin and libopenmpi-dev)"

-- The command that runs `bin/lantern <script>` on np ranks (np = nil: one plain process).
-- Under `make check` the sanitizer runtime is preloaded into the ranks only (mpirun and its
-- daemon are not built with it), with spec/mpi.supp for Open MPI's allocations that live
-- until exit.
local function command(script, outdir, np)
  local env = { "OPENBLAS_NUM_THREADS=1", "DIST_OUT=" .. shq(outdir) }
  local pre = os.getenv("LD_PRELOAD")
  local san = pre and pre ~= ""
  if san then
    env[#env + 1] = "LSAN_OPTIONS=" .. shq("suppressions=" .. ROOT .. "/spec/mpi.supp:print_suppressions=0")
    -- Open MPI unloads its components at finalize: only a full unwind reaches the frames of
    -- its libraries, which the suppressions name, from an allocation made in one
    env[#env + 1] = "ASAN_OPTIONS=" .. shq((os.getenv("ASAN_OPTIONS") or "") .. ":fast_unwind_on_malloc=0")
  end
  local run = "bin/lantern " .. shq(script)
  if np then
    local x = "-x OPENBLAS_NUM_THREADS -x DIST_OUT -x LANTERN_BUILD -x ASAN_OPTIONS -x LSAN_OPTIONS"
    if san then x = x .. " -x LD_PRELOAD=" .. shq(pre) end
    run = string.format("mpirun -np %d --oversubscribe --allow-run-as-root %s %s", np, x, run)
    if san then run = "env -u LD_PRELOAD " .. table.concat(env, " ") .. " " .. run
    else run = "env " .. table.concat(env, " ") .. " " .. run end
  else
    run = "env " .. table.concat(env, " ") .. " " .. run
  end
  return string.format("timeout %d %s 2>&1", TIMEOUT_S, run)
end

-- Runs a worker; returns its exit status, its output and the ranks' result tables.
local function launch(script, np)
  local outdir = os.tmpname()
  os.remove(outdir)
  assert(os.execute("mkdir -p " .. shq(outdir)))
  local p = assert(io.popen(command(script, outdir, np)))
  local out = p:read("a")
  local _, _, code = p:close()
  local ranks = {}
  for r = 0, (np or 1) - 1 do
    local f = loadfile(outdir .. "/rank" .. r .. ".lua")
    ranks[r] = f and f() or nil
  end
  os.execute("rm -rf " .. shq(outdir))
  return code, out, ranks
end

-- Each worker runs once; its failure is reported by every test that reads it.
local cache = {}
local function results(script)
  if not cache[script] then
    local code, out, ranks = launch("spec/dist/" .. script .. ".lua", 2)
    if code ~= 0 then cache[script] = { failed = script .. " failed (exit " .. tostring(code) .. "):\n" .. out }
    elseif not (ranks[0] and ranks[1]) then cache[script] = { failed = script .. " wrote no results:\n" .. out }
    else cache[script] = { ranks = ranks } end
  end
  assert(not cache[script].failed, cache[script].failed)
  return cache[script].ranks
end

local function needs_mpirun()
  if not HAVE_MPIRUN then pending(NO_MPIRUN) return false end
  return true
end

-- The inputs of spec/dist/collectives.lua on rank r, and the reductions, in plain Lua.
local function input(dtype, r)
  if dtype == "bool" then return r == 0 and { true, false, true, false } or { true, true, false, false } end
  if dtype == "int64" then return { r + 1, 3 - 2 * r, -(r + 2) } end
  return { r + 1.5, 3 - 2 * r, -(r + 2) }
end
local FOLD = {
  sum = function(a, b) return a + b end, prod = function(a, b) return a * b end,
  min = math.min, max = math.max, avg = function(a, b) return (a + b) / 2 end,
}
local BOOL_FOLD = { sum = "or", max = "or", prod = "and", min = "and" }
local function reduced(dtype, op)
  local a, b, out = input(dtype, 0), input(dtype, 1), {}
  for i = 1, #a do
    if dtype == "bool" then
      out[i] = BOOL_FOLD[op] == "or" and (a[i] or b[i]) or (a[i] and b[i])
    else
      out[i] = FOLD[op](a[i], b[i])
    end
  end
  return out
end
local function doubled(dtype, v)
  local out = {}
  for i, x in ipairs(v) do
    if dtype == "bool" then out[i] = not x else out[i] = x * 2 end
  end
  return out
end

describe("lt.distributed", function()
  it("is a world of one in a plain run, and finalizes", function()
    local script = os.tmpname()
    support.writefile(script, [[
      local lt = require "lantern"
      local dist = lt.distributed
      local r, n = dist.init()
      local t = lt.tensor{1.5, -2}
      dist.all_reduce(t, {op = "sum"})
      local list = dist.all_gather(lt.tensor{7})
      dist.broadcast(t, 0)
      io.write(r, " ", n, " ", tostring(dist.is_initialized()), " ", t[1]:item(), " ", t[2]:item(),
        " ", #list, " ", list[1][1]:item())
      dist.finalize()
      io.write(" ", tostring(dist.is_initialized()), "\n")
    ]])
    local code, out = launch(script, nil)
    os.remove(script)
    assert.are.equal(0, code, out)
    assert.are.equal("0 1 true 1.5 -2 1 7 false", out:match("0 1 true[^\n]*"), out)
  end)

  it("names what to install when the MPI module is missing", function()
    -- in this process MPI is never started: the module's loader is replaced by a failing one
    local saved = package.preload["lantern.mpi"]
    local was = package.loaded["lantern.mpi"]
    package.loaded["lantern.mpi"] = nil
    package.preload["lantern.mpi"] = function() error("module 'lantern.mpi' not found") end
    local ok, err = pcall(lt.distributed.init)
    package.preload["lantern.mpi"] = saved
    package.loaded["lantern.mpi"] = was
    assert.is_false(ok)
    assert.truthy(tostring(err):find("apt-get install libopenmpi-dev openmpi-bin", 1, true), err)
  end)

  it("refuses calls before init and unknown options", function()
    local dist = lt.distributed
    assert.is_false(dist.is_initialized())
    expect_error(function() dist.get_rank() end, "get_rank: lt.distributed is not initialized")
    expect_error(function() dist.all_reduce(lt.zeros(2)) end, "all_reduce: lt.distributed is not initialized")
    expect_error(function() dist.init({ backend = "gloo" }) end, "unknown backend 'gloo'")
    expect_error(function() dist.init({ bakend = "mpi" }) end, "unknown option 'bakend'")
  end)

  describe("on two ranks", function()
    local DTYPES = { "float32", "float64", "int64", "bool" }

    it("reduces every dtype with every op", function()
      if not needs_mpirun() then return end
      local R = results("collectives")
      for r = 0, 1 do
        assert.are.same({ r, 2, true }, { R[r].rank, R[r].world, R[r].initialized })
        for _, dt in ipairs(DTYPES) do
          for _, op in ipairs { "sum", "prod", "min", "max", "avg" } do
            local got = R[r].all_reduce[dt][op]
            if op == "avg" and (dt == "int64" or dt == "bool") then
              assert.are.equal("all_reduce: op 'avg' needs a floating-point tensor, got " .. dt, got)
            else
              assert.are.same(reduced(dt, op), got, dt .. " " .. op)
            end
          end
          assert.are.same({ value = reduced(dt, "max"), completed = true }, R[r].all_reduce_async[dt])
        end
        assert.are.same({ { 3, 6 }, { 9, 12 } }, R[r].noncontig)
        assert.are.same({ { 3, 6 }, { 9, 12 } }, R[r].noncontig_async)
      end
    end)

    it("broadcasts from a non-zero rank, reduces to one, gathers and scatters", function()
      if not needs_mpirun() then return end
      local R = results("collectives")
      for _, dt in ipairs(DTYPES) do
        local in0, in1 = input(dt, 0), input(dt, 1)
        for r = 0, 1 do
          assert.are.same({ in1, in1 }, R[r].broadcast[dt], dt)
          assert.are.same({ in0, in1, in0, in1 }, R[r].all_gather[dt], dt)
        end
        assert.are.same(in0, R[0].reduce[dt])
        assert.are.same(reduced(dt, dt == "bool" and "sum" or "prod"), R[1].reduce[dt])
        assert.are.equal("none", R[0].gather[dt])
        assert.are.same({ in0, in1 }, R[1].gather[dt])
        assert.are.same(in1, R[0].scatter[dt])
        assert.are.same(doubled(dt, in1), R[1].scatter[dt])
      end
      assert.are.same({ { 2, 3 }, { { 1.25, 1.25, 1.25 }, { 1.25, 1.25, 1.25 } } }, R[0].all_gather_2d)
      assert.are.same({ "no error", "no error" }, { R[0].barrier, R[1].barrier_async })
    end)

    it("raises on every rank for mismatched calls, and stays in step", function()
      if not needs_mpirun() then return end
      local R = results("collectives")
      local both = {
        shape = "all_reduce: the tensors' shapes differ across ranks",
        dtype = "all_reduce: the tensors' dtypes differ across ranks",
        kind = "the ranks called different collectives",
        op = "all_reduce: the ranks give different ops",
        src = "broadcast: the ranks give different src/dst ranks",
        gather_2d = "all_gather: the tensors' shapes differ across ranks",
        option = "all_reduce: unknown option 'opp' (did you mean 'op'?)",
      }
      for r = 0, 1 do
        for k, text in pairs(both) do
          assert.truthy(R[r].errors[k]:find(text, 1, true), k .. ": " .. R[r].errors[k])
        end
        assert.are.same({ 3 }, R[r].after_errors)
      end
      assert.truthy(R[0].errors.kind:find("this rank all_reduce", 1, true))
      assert.truthy(R[1].errors.kind:find("this rank broadcast", 1, true))
      assert.are.equal("broadcast: rank 5 is not in the world (ranks are 0 to 1)", R[1].errors.bad_src)
      assert.are.equal("broadcast: the arguments of rank 1 failed their checks (see its error)", R[0].errors.bad_src)
      assert.are.equal("all_reduce: unknown op 'mean' (expected sum, prod, min, max or avg)", R[1].errors.bad_op)
      assert.are.equal("all_reduce: the arguments of rank 1 failed their checks (see its error)", R[0].errors.bad_op)
      assert.are.equal("scatter: rank 0 (src) needs a list of 2 tensors, got 1 values", R[0].errors.scatter_list)
      assert.are.equal("scatter: the arguments of rank 0 failed their checks (see its error)", R[1].errors.scatter_list)
    end)

    it("ends every rank with an error when one rank raises", function()
      if not needs_mpirun() then return end
      local code, out = launch("spec/dist/fail.lua", 2)
      assert.are_not.equal(0, code, out)
      assert.are_not.equal(124, code, "the job hung until the timeout:\n" .. out)
      assert.truthy(out:find("rank 1 fails on purpose", 1, true), out)
      assert.falsy(out:find("rank 0 should never get here", 1, true), out)
    end)
  end)
end)

describe("nn.parallel.DistributedDataParallel on two ranks", function()
  local function max_diff(a, b)
    assert.are.equal(#a, #b)
    local m = 0
    for i = 1, #a do m = math.max(m, math.abs(a[i] - b[i])) end
    return m
  end

  it("starts every rank from rank 0's parameters", function()
    if not needs_mpirun() then return end
    local R = results("ddp")
    for _, k in ipairs { "sgd", "adam", "sgd_clip" } do
      assert.is_true(max_diff(R[0][k].before, R[1][k].before) > 0.01, "the ranks started alike")
      assert.are.same(R[0][k].before, R[0][k].after_wrap)
      assert.are.same(R[0][k].before, R[1][k].after_wrap)
    end
  end)

  it("trains two half batches as one process trains the whole batch, bitwise alike on both ranks", function()
    if not needs_mpirun() then return end
    local R = results("ddp")
    for _, k in ipairs { "sgd", "adam", "sgd_clip" } do
      assert.are.same(R[0][k].final, R[1][k].final)
      local d = max_diff(R[0][k].final, R[0][k].reference)
      assert.is_true(d < 1e-6, k .. ": " .. d .. " from the single process")
      -- training moved the parameters well beyond that tolerance
      assert.is_true(max_diff(R[0][k].final, R[0][k].before) > 1e-2, k)
    end
    assert.are.equal(1, R[0].sgd.buckets)
    assert.is_true(R[0].sgd_clip.buckets > 2, "a small bucket_cap_mb makes several buckets")
  end)

  it("works when made and stepped inside lt.tidy", function()
    if not needs_mpirun() then return end
    local R = results("ddp")
    assert.are.same({ "no error", "no error" }, { R[0].tidy_error, R[1].tidy_error })
    assert.are.same(R[0].tidy, R[1].tidy)
  end)

  it("accumulates without averaging inside no_sync", function()
    if not needs_mpirun() then return end
    local R = results("ddp")
    assert.are.same(R[0].no_sync.grads, R[1].no_sync.grads)
    assert.is_true(max_diff(R[0].no_sync.grads, R[0].no_sync.reference) < 1e-6)
    -- inside no_sync each rank kept its own gradient
    assert.is_true(max_diff(R[0].no_sync.local_first, R[1].no_sync.local_first) > 1e-4)
  end)

  it("keeps the module's names and checks its arguments and unused parameters", function()
    if not needs_mpirun() then return end
    local R = results("ddp")
    local keys = { "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias" }
    assert.are.same(keys, R[0].keys)
    local prefixed = {}
    for i, k in ipairs(keys) do prefixed[i] = "module." .. k end
    assert.are.same(prefixed, R[0].wrapper_keys)
    assert.is_true(R[0].same_module)
    for r = 0, 1 do
      assert.truthy(R[r].unused:find("parameters b.bias, b.weight got no gradient", 1, true), R[r].unused)
    end
    assert.are.equal("DistributedDataParallel: expected a Module, got integer", R[0].not_module)
    assert.are.equal("DistributedDataParallel: unknown option 'bucket_cap' (did you mean 'bucket_cap_mb'?)",
      R[0].bad_option)
  end)

  it("needs lt.distributed to be initialized", function()
    expect_error(function() lt.nn.parallel.DistributedDataParallel(lt.nn.Linear(2, 2)) end,
      "DistributedDataParallel: lt.distributed is not initialized")
  end)
end)

describe("examples/ddp_fashion.lua on two ranks", function()
  it("trains, rank 0 reports and writes the checkpoint, and a resume goes on from it", function()
    if not needs_mpirun() then return end
    local data_dir = "/usr/share/datasets/fashion-mnist"
    if not io.open(data_dir .. "/t10k-labels-idx1-ubyte.gz") then
      pending("needs the Debian package dataset-fashion-mnist (CI installs it)")
      return
    end
    local out = os.tmpname()
    os.remove(out)
    local script = os.tmpname()
    -- the example's arguments come after the script (a wrapper that sets them)
    local function run(extra)
      support.writefile(script, string.format([[
        arg = { "--limit", "256", "--batch", "32", "--out", %q, "--quiet" %s }
        dofile("examples/ddp_fashion.lua")
      ]], out, extra))
      return launch(script, 2)
    end
    local code, text = run(', "--epochs", "1"')
    assert.are.equal(0, code, text)
    local _, n = text:gsub("epoch 1: train loss", "")
    assert.are.equal(1, n, "rank 0 alone reports:\n" .. text)
    assert.truthy(text:find("on 2 ranks", 1, true), text)
    local ck = lt.load(out .. "/checkpoint.pt")
    assert.are.equal(1, ck.epoch)
    assert.are.equal(2, ck.world)
    assert.truthy(ck.model["features.0.weight"], "the checkpoint has the module's own names")
    code, text = run(', "--epochs", "2", "--resume"')
    assert.are.equal(0, code, text)
    assert.truthy(text:find("resumed from " .. out .. "/checkpoint.pt after epoch 1", 1, true), text)
    assert.truthy(text:find("epoch 2: train loss", 1, true), text)
    assert.are.equal(2, lt.load(out .. "/checkpoint.pt").epoch)
    os.remove(script)
    os.execute("rm -rf " .. shq(out))
  end)
end)

describe("data.DistributedSampler", function()
  local cases = dofile("spec/fixtures/dist_sampler.lua")
  local DS = lt.data.DistributedSampler
  local function range(n) local t = {} for i = 1, n do t[i] = i end return t end
  local function one_based(list)
    local out = {}
    for i, v in ipairs(list) do out[i] = v + 1 end
    return out
  end

  it("partitions as PyTorch does, padding and dropping the tail (fixture)", function()
    assert.is_true(#cases > 100)
    for _, c in ipairs(cases) do
      for r = 0, c.replicas - 1 do
        local s = DS(range(c.n), { num_replicas = c.replicas, rank = r, shuffle = c.shuffle,
          seed = c.seed, drop_last = c.drop_last })
        s:set_epoch(c.epoch)
        local label = string.format("n=%d replicas=%d rank=%d shuffle=%s drop_last=%s", c.n,
          c.replicas, r, tostring(c.shuffle), tostring(c.drop_last))
        assert.are.equal(c.len, #s, label)
        -- Lantern's generator is not PyTorch's: a shuffled case is checked by partitioning
        -- PyTorch's permutation, an unshuffled one as it is
        local got = c.shuffle and s:_partition(one_based(c.perm)) or s:indices()
        assert.are.same(one_based(c.ranks[r + 1]), got, label)
      end
    end
  end)

  it("shuffles with seed + epoch: a permutation of the dataset, the same on every rank", function()
    local n, world = 11, 3
    local seen = {}
    local orders = {}
    for r = 0, world - 1 do
      local s = DS(range(n), { num_replicas = world, rank = r, seed = 5 })
      s:set_epoch(2)
      orders[r] = s:indices()
      for _, i in ipairs(orders[r]) do seen[i] = (seen[i] or 0) + 1 end
      assert.are.same(s:_partition(lt.randperm(n, { generator = lt.Generator(7) }):tolist()), orders[r])
    end
    local total = 0
    for i = 1, n do
      assert.truthy(seen[i], "position " .. i .. " is missing")
      total = total + seen[i]
    end
    assert.are.equal(12, total)   -- padded to a multiple of 3: one position twice
    local s = DS(range(n), { num_replicas = world, rank = 0, seed = 5 })
    s:set_epoch(3)
    assert.are_not.same(orders[0], s:indices())
  end)

  it("feeds a DataLoader", function()
    local x = lt.arange(1, 11):double()
    local ds = lt.data.TensorDataset(x)
    local s = DS(ds, { num_replicas = 3, rank = 1, shuffle = false })
    local loader = lt.data.DataLoader(ds, { batch_size = 2, sampler = s })
    assert.are.equal(2, #loader)
    local got = {}
    for xb in loader:iter() do got[#got + 1] = xb:tolist() end
    assert.are.same({ { 2, 5 }, { 8, 1 } }, got)   -- positions 2, 5, 8 and the padding's 1
    expect_error(function() lt.data.DataLoader(ds, { sampler = s, shuffle = true }) end,
      "sampler option is mutually exclusive with shuffle")
  end)

  it("checks its arguments", function()
    expect_error(function() DS(range(4), { num_replicas = 2, rank = 2 }) end,
      "DistributedSampler: Invalid rank 2, rank should be in the interval [0, 1]")
    expect_error(function() DS(range(4), { num_replicas = 0, rank = 0 }) end,
      "num_replicas should be a positive integer")
    expect_error(function() DS(range(4)) end, "num_replicas and rank are needed when lt.distributed is not initialized")
    expect_error(function() DS(range(4), { num_replicas = 2, rank = 0, shufle = true }) end,
      "unknown option 'shufle' (did you mean 'shuffle'?)")
  end)
end)
