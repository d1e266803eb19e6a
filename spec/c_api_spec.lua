-- The op layer as a C API (include/lantern_ops.h) with no Lua: examples/embed_c/infer.c, linked
-- with liblantern.a and no Lua library, runs a checkpoint that Lua wrote and prints what the
-- Lua model computes; spec/c/ops_c_api.c checks the error paths (-1, a message naming the op
-- and shapes, *out and the inputs untouched) and the C checkpoint functions.
local lt = require "lantern"
local cc = require "c.ccutil"
local nn, F = lt.nn, lt.nn.functional

-- The user's link line: the core's libraries only (no -llua5.4, no Lua headers).
local function build_without_lua(src)
  local exe = os.tmpname()
  local san = cc.sanitized() and "-fsanitize=address,undefined -fno-omit-frame-pointer" or ""
  local cmd = string.format(
    "env -u LD_PRELOAD cc -std=c11 -O2 -g -Wall -Wextra -Werror %s -I%s %s %s %s -o %s 2>&1",
    san, cc.shq(cc.abspath("include")), cc.shq(cc.abspath(src)), cc.shq(cc.lib()), cc.ldlibs(),
    cc.shq(exe))
  local p = assert(io.popen(cmd))
  local log = p:read("a")
  assert(p:close(), "compiling " .. src .. " failed:\n" .. cmd .. "\n" .. log)
  return exe
end

local function rows_of(out, label)
  local rows = {}
  for i, vals in out:gmatch(label .. " (%d+):([^\n]*)") do
    local r = {}
    for v in vals:gmatch("%S+") do r[#r + 1] = tonumber(v) end
    rows[tonumber(i) + 1] = r
  end
  return rows
end

describe("C API without Lua (lantern_ops.h)", function()
  local infer, ops, model_path, scratch

  setup(function()
    infer = build_without_lua("examples/embed_c/infer.c")
    ops = build_without_lua("spec/c/ops_c_api.c")
    model_path = os.tmpname() .. ".safetensors"
    scratch = os.tmpname() .. ".safetensors"
  end)
  teardown(function()
    for _, f in ipairs { infer, ops, model_path, scratch } do if f then os.remove(f) end end
  end)

  it("infer.c prints the forward that Lua computes from the same checkpoint", function()
    -- the example's own script writes the checkpoint (with a seed of its own), run in this
    -- process: a fresh one would load core.so from disk again
    local saved_arg, saved_print = _G.arg, _G.print
    _G.arg, _G.print = { model_path, "11" }, function() end
    local ok, e = pcall(dofile, cc.abspath("examples/embed_c/make_model.lua"))
    _G.arg, _G.print = saved_arg, saved_print
    assert(ok, e)
    local x = { 0.5, -1.25, 2.0, 0.125, -0.75, 0.0, 1.5, -2.5, 3.0, 1.0, -1.0, 0.25 }
    local args = { model_path }
    for _, v in ipairs(x) do args[#args + 1] = tostring(v) end
    local out, err, code = cc.run(infer, args)
    assert.are.equal(0, code, "infer failed:\n" .. out .. err)

    local sd = lt.safetensors.load(model_path)
    local m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    m:load_state_dict(sd)
    local rows = {}
    for i = 1, #x, 4 do rows[#rows + 1] = { x[i], x[i + 1], x[i + 2], x[i + 3] } end
    local logits = lt.no_grad(function() return m(lt.tensor(rows, { dtype = "float32" })) end)
    local probs = F.softmax(logits, 2)
    local got_logits, got_probs = rows_of(out, "logits"), rows_of(out, "probs")
    assert.are.equal(3, #got_logits, out)
    assert.are.equal(3, #got_probs, out)
    for i = 1, 3 do
      assert.are.equal(3, #got_logits[i], out)
      for j = 1, 3 do
        local want_l, want_p = logits[i][j]:item(), probs[i][j]:item()
        assert.is_true(math.abs(got_logits[i][j] - want_l) <= 1e-6,
          string.format("logits[%d][%d] = %.9g, Lua %.9g", i, j, got_logits[i][j], want_l))
        assert.is_true(math.abs(got_probs[i][j] - want_p) <= 1e-6,
          string.format("probs[%d][%d] = %.9g, Lua %.9g", i, j, got_probs[i][j], want_p))
      end
    end
  end)

  it("infer.c reports a missing checkpoint and a bad input count", function()
    local out, err, code = cc.run(infer, { "/nonexistent/mlp.safetensors", "1", "2", "3", "4" })
    assert.are.equal(1, code, out .. err)
    assert.truthy(err:find("load_safetensors: cannot open '/nonexistent/mlp.safetensors'", 1, true), err)
    assert.are.equal("", out)
    lt.manual_seed(3)
    lt.safetensors.save(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)):state_dict(),
      model_path)
    out, err, code = cc.run(infer, { model_path, "1", "2", "3" })
    assert.are.equal(1, code, out .. err)
    assert.truthy(err:find("got 3 inputs, expected a positive multiple of 4", 1, true), err)
  end)

  it("a failed op returns -1, names the op and shapes, and changes nothing", function()
    local out, err, code = cc.run(ops, { scratch })
    assert.are.equal(0, code, "ops_c_api failed:\n" .. out .. err)
    local expect = {
      matmul = "matmul: shapes [2, 3] and [4, 5] cannot be multiplied",
      addmm = "addmm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5",
      binary = "add: shapes [2, 3] and [4, 5] cannot be broadcast",
      binary_ = "mul_: shapes [2, 3] and [4, 5] cannot be broadcast",
      softmax = "softmax: dimension 3 out of range",
      view = "view: shape [5] is invalid for input of size 6",
      -- not a failure: float32 and float64 agree where zeros follow the image (padding_extra)
      conv_padding_extra = "output 6 x 7, differences",
    }
    for name, msg in pairs(expect) do
      local line = out:match("\n?" .. name:gsub("_", "%%_") .. ": ok: ([^\n]*)")
      assert.truthy(line, name .. " did not pass:\n" .. out)
      assert.truthy(line:find(msg, 1, true), name .. ": " .. line)
    end
  end)

  it("saves, loads and looks up checkpoints from C, and refuses bad ones", function()
    local out, err, code = cc.run(ops, { scratch })
    assert.are.equal(0, code, out .. err)
    for _, name in ipairs { "save", "load", "load_state_dict", "save_duplicate", "load_missing",
                            "inputs_kept" } do
      assert.truthy(out:find("\n" .. name .. ": ok:", 1, true), name .. ":\n" .. out)
    end
    -- what C wrote, Lua reads with the same names and values
    local t = lt.safetensors.load(scratch)
    assert.are.same({ 2, 3 }, t["layer.weight"]:size())
    assert.are.equal(15.0, t["layer.weight"]:sum():item())
    assert.are.same({ 1, 4 }, t["layer.bias"]:size())
    assert.are.equal(3.0, t["layer.bias"][1][4]:item())
  end)
end)

describe("the names core.so exports", function()
  local function lines(cmd)
    local p = assert(io.popen(cmd))
    local out = {}
    for l in p:lines() do out[#out + 1] = l end
    p:close()
    return out
  end

  -- What a C host may call is what include/ declares; every internal name has a layer prefix
  -- (ltB_, ltO_, ...; docs/architecture.md) and stays hidden.
  it("are lt_ names declared in include/, lantern_* and luaopen_*, nothing internal", function()
    local so = cc.abspath(cc.build_dir .. "/lantern/core.so")
    local syms = lines("nm -D --defined-only " .. cc.shq(so) .. " | awk '{print $3}'")
    assert.is_true(#syms > 100, "nm found " .. #syms .. " symbols in " .. so)
    local declared = {}
    for _, h in ipairs { "include/lantern.h", "include/lantern_ops.h" } do
      for id in io.open(cc.abspath(h)):read("a"):gmatch("[%w_]+") do declared[id] = true end
    end
    local bad = {}
    for _, s in ipairs(syms) do
      local api = (s:match("^lt_") and declared[s]) or s:match("^lantern_") or s:match("^luaopen_")
      if not api then bad[#bad + 1] = s end
    end
    assert.are.same({}, bad)
  end)
end)
