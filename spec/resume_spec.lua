-- Exact resume: a run stopped after N steps and resumed from its checkpoint ends bitwise equal
-- to the uninterrupted run, with shuffled loading, Dropout, an optimiser with state and a
-- scheduler.
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional

local function setup()
  lt.manual_seed(42)
  local X = lt.randn(40, 5)
  local Y = lt.randint(1, 4, { 40 })
  local model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 3))
  local opt = lt.optim.Adam(model:parameters(), { lr = 0.01 })
  local sched = lt.optim.lr_scheduler.StepLR(opt, 3, { gamma = 0.7 })
  local gen = lt.Generator(5)
  local loader = lt.data.DataLoader(lt.data.TensorDataset(X, Y),
    { batch_size = 8, shuffle = true, generator = gen })
  return { model = model, opt = opt, sched = sched, gen = gen, loader = loader }
end

-- Runs steps [from, to] (global step numbers); resumes mid-epoch by replaying the epoch's
-- shuffle from the generator state saved at the epoch's start.
local function train(r, from, to, epoch_state)
  local per_epoch = #r.loader
  local step = from - 1
  while step < to do
    local epoch_start = step - step % per_epoch   -- steps done before this epoch
    if step % per_epoch == 0 then epoch_state = r.gen:get_state() end
    r.gen:set_state(epoch_state)
    local b = 0
    for xb, yb in r.loader:iter() do
      b = b + 1
      if epoch_start + b > step then
        local loss = F.cross_entropy(r.model(xb), yb)
        r.opt:zero_grad()
        loss:backward()
        r.opt:step()
        r.sched:step()
        step = step + 1
        if step >= to then break end
      end
    end
  end
  if step % per_epoch ~= 0 then return epoch_state end
  return nil
end

describe("exact resume", function()
  it("matches the uninterrupted run bitwise", function()
    local total, stop = 17, 7
    local a = setup()
    train(a, 1, total, nil)

    local b = setup()
    local es = train(b, 1, stop, nil)
    local path = os.tmpname() .. ".pt"
    lt.save({ model = b.model:state_dict(), optimizer = b.opt:state_dict(),
      scheduler = b.sched:state_dict(), epoch_rng = es or b.gen:get_state(),
      rng = lt.get_rng_state(), step = stop }, path)

    -- a fresh process state: new objects, scrambled random state
    lt.manual_seed(999)
    local c = setup()
    lt.manual_seed(12345)
    local ck = lt.load(path)
    os.remove(path)
    c.model:load_state_dict(ck.model)
    c.opt:load_state_dict(ck.optimizer)
    c.sched:load_state_dict(ck.scheduler)
    lt.set_rng_state(ck.rng)
    train(c, ck.step + 1, total, ck.epoch_rng)

    for name, p in a.model:named_parameters() do
      local q = c.model:get_parameter(name)
      assert.is_true(lt.equal(p, q), "parameter " .. name .. " differs after resume")
    end
    assert.are.equal(a.opt.param_groups[1].lr, c.opt.param_groups[1].lr)
  end)
end)
