-- The fused optimiser kernels (src/cpu/optim.c) on parameters large enough for the vector
-- loops and the pool: every flag combination gives the same bits at 1 and at 2 threads and at
-- every ISA level the CPU supports, and float32 follows the float64 trajectory within rounding.
-- (Their formulas are checked against PyTorch, combination by combination, in optim_spec.)
local lt = require "lantern"
local support = require "support"

-- each optimiser with each combination of the flags its kernel switches on
local CONFIGS = [[
return {
  { "SGD", { lr = 0.1 } }, { "SGD", { lr = 0.1, weight_decay = 0.1, maximize = true } },
  { "SGD", { lr = 0.05, momentum = 0.9 } }, { "SGD", { lr = 0.05, momentum = 0.9, weight_decay = 0.01 } },
  { "SGD", { lr = 0.05, momentum = 0.9, nesterov = true } },
  { "SGD", { lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.01 } },
  { "Adam", { lr = 0.01 } }, { "Adam", { lr = 0.01, amsgrad = true } },
  { "Adam", { lr = 0.01, weight_decay = 0.1 } }, { "Adam", { lr = 0.01, weight_decay = 0.1, amsgrad = true } },
  { "AdamW", { lr = 0.01 } }, { "AdamW", { lr = 0.01, amsgrad = true, maximize = true } },
  { "RMSprop", { lr = 0.01 } }, { "RMSprop", { lr = 0.01, momentum = 0.9 } },
  { "RMSprop", { lr = 0.01, centered = true } }, { "RMSprop", { lr = 0.01, centered = true, momentum = 0.9 } },
  { "RMSprop", { lr = 0.01, weight_decay = 0.1 } }, { "RMSprop", { lr = 0.01, weight_decay = 0.1, momentum = 0.9 } },
  { "RMSprop", { lr = 0.01, weight_decay = 0.1, centered = true } },
  { "RMSprop", { lr = 0.01, weight_decay = 0.1, centered = true, momentum = 0.9 } },
  { "Adagrad", { lr = 0.1 } }, { "Adagrad", { lr = 0.1, weight_decay = 0.1 } },
}
]]

-- three steps of each configuration on a 70001-element float32 parameter, as hex floats
local RUN = [==[
local lt = require "lantern"
local configs = load(%q)()
lt.set_num_threads(tonumber(arg[1]))
local out = {}
for _, c in ipairs(configs) do
  lt.manual_seed(3)
  local p = lt.randn(70001):requires_grad_()
  local opt = lt.optim[c[1]]({ p }, c[2])
  for _ = 1, 3 do
    p.grad = lt.randn(70001)
    opt:step()
  end
  local s = p:detach():sum():item()
  local t = {}
  for _, v in ipairs(p:detach():narrow(1, 69990, 12):tolist()) do t[#t + 1] = string.format("%%a", v) end
  out[#out + 1] = string.format("%%a %%a %%s", s, (p:detach() * p:detach()):sum():item(), table.concat(t, ","))
end
print(table.concat(out, " "))
]==]

local function run(threads, env)
  return support.run_lua(string.format(RUN, CONFIGS), env, tostring(threads))
end

describe("fused optimiser kernels", function()
  it("give the same bits at 1 and 2 threads and at every ISA level the CPU supports", function()
    local base, err = run(1, "LANTERN_ISA=sse4")
    assert.are.equal("", err)
    assert.truthy(#base > 1000, base:sub(1, 200))
    local two = run(2, "LANTERN_ISA=sse4")
    assert.is_true(base == two, "results depend on the number of threads")
    local levels = support.isa_levels()
    for _, isa in ipairs { "avx2", "avx512" } do
      if levels[isa] then
        local out, e = run(2, "LANTERN_ISA=" .. isa)
        assert.are.equal("", e)
        assert.is_true(out == base, isa .. " results differ from sse4's")
      end
    end
  end)

  it("follow the float64 trajectory in float32, every flag combination", function()
    local saved = lt.get_num_threads()
    lt.set_num_threads(2)
    for i, c in ipairs(load(CONFIGS)()) do
      lt.manual_seed(8)
      local p0, gs = lt.randn(40000), { lt.randn(40000), lt.randn(40000), lt.randn(40000) }
      local p32, p64 = p0:clone():requires_grad_(), p0:double():requires_grad_()
      local o32, o64 = lt.optim[c[1]]({ p32 }, c[2]), lt.optim[c[1]]({ p64 }, c[2])
      for _, g in ipairs(gs) do
        p32.grad, p64.grad = g:clone(), g:double()
        o32:step()
        o64:step()
      end
      local moved = (p64:detach() - p0:double()):abs():max():item()
      local err = (p32:detach():double() - p64:detach()):abs():max():item()
      assert.is_true(moved > 1e-3, c[1] .. " did not move the parameter")
      assert.is_true(err <= 1e-5 * (1 + p64:detach():abs():max():item()),
        string.format("%s %d: float32 off float64 by %g", c[1], i, err))
    end
    lt.set_num_threads(saved)
  end)
end)
