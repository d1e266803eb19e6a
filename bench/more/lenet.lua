-- LeNet-style CNN training step (28x28, batch 64), the demo's CNN throughput (images/s), and
-- 3x3 convolutions of CIFAR-sized networks alone (forward and both gradients).
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional

return function(group, timeit)
  group("lenet", function(report)
    lt.manual_seed(0)
    local model = nn.Sequential(nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
      nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    local opt = lt.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
    local x = lt.randn(64, 1, 28, 28)
    local y = lt.randint(1, 11, { 64 })
    report("lenet_ms", timeit(function()
      local loss = F.cross_entropy(model(x), y)
      opt:zero_grad()
      loss:backward()
      opt:step()
    end, 1.0) * 1e3, false)
  end)
  group("demo", function(report)
    lt.manual_seed(0)
    local model = nn.Sequential(
      nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    local opt = lt.optim.Adam(model:parameters(), { lr = 1e-3 })
    local x = lt.randn(64, 1, 28, 28)
    local y = lt.randint(1, 11, { 64 })
    local t = timeit(function()
      local loss = F.cross_entropy(model(x), y)
      opt:zero_grad()
      loss:backward()
      opt:step()
    end, 1.0)
    report("demo_img_per_s", 64 / t, true)
  end)
  -- 64 -> 64 channels, padding 1, on 16 x 16 (batch 32) and 8 x 8 (batch 64): Winograd's path
  -- (src/cpu/winograd.c) both
  group("conv", function(report)
    lt.manual_seed(0)
    for _, c in ipairs({ { "conv3x3_16_ms", 32, 16 }, { "conv3x3_8_ms", 64, 8 } }) do
      local x = lt.randn(c[2], 64, c[3], c[3]):requires_grad_()
      local w = lt.randn(64, 64, 3, 3):requires_grad_()
      local b = lt.randn(64):requires_grad_()
      local g = lt.randn(c[2], 64, c[3], c[3])
      report(c[1], timeit(function()
        F.conv2d(x, w, b, { padding = 1 }):backward(g)
        x.grad, w.grad, b.grad = nil, nil, nil
      end, 1.0) * 1e3, false)
    end
  end)
end
