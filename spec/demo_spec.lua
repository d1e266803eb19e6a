-- The main demo, shortened: a few hundred Fashion-MNIST images. The loss must fall and the
-- checkpoint must reload into a fresh model that predicts exactly the same.
local lt = require "lantern"

package.path = "examples/?.lua;" .. package.path
local plot = require "svgplot"

-- What a reader of the curves needs: whole-number epoch ticks, round value ticks at equal
-- steps, and the legend above every curve (SVG's y grows downwards).
local function check_svg(svg)
  local xticks, yticks, legend_y, curve_y = {}, {}, {}, {}
  for x, anchor, label in svg:gmatch('<text x="([%d%.%-]+)" y="[%d%.%-]+" font%-size="10" text%-anchor="(%a+)">([^<]*)</text>') do
    if anchor == "middle" then
      xticks[#xticks + 1] = label
    else
      -- value ticks grouped by panel (their x)
      yticks[x] = yticks[x] or {}
      table.insert(yticks[x], label)
    end
  end
  for y in svg:gmatch('<text x="[%d%.%-]+" y="([%d%.%-]+)" font%-size="11" fill=') do legend_y[#legend_y + 1] = tonumber(y) end
  for pts in svg:gmatch('<polyline[^>]- points="([^"]*)"') do
    for y in pts:gmatch(",([%d%.%-]+)") do curve_y[#curve_y + 1] = tonumber(y) end
  end
  assert.is_true(#xticks > 0 and next(yticks) ~= nil and #legend_y > 0 and #curve_y > 0, svg)
  for _, l in ipairs(xticks) do assert.truthy(l:match("^%d+$"), "x tick " .. l) end
  for _, labels in pairs(yticks) do
    assert.is_true(#labels >= 2, table.concat(labels, " "))
    local step = tonumber(labels[2]) - tonumber(labels[1])
    for i, l in ipairs(labels) do
      assert.truthy(#(l:match("%.(%d+)$") or "") <= 3, "y tick " .. l)
      -- round: a whole multiple of a step of 1, 2, 2.5 or 5 times a power of ten
      local q = tonumber(l) / step
      assert.is_true(math.abs(q - math.floor(q + 0.5)) < 1e-6, "y tick " .. l .. " step " .. step)
      if i > 1 then
        assert.is_true(math.abs(tonumber(l) - tonumber(labels[i - 1]) - step) < 1e-9,
          "uneven y ticks " .. table.concat(labels, " "))
      end
    end
    local mant = step / 10 ^ math.floor(math.log(step, 10) + 1e-9)
    local nice = false
    for _, m in ipairs { 1, 2, 2.5, 5 } do if math.abs(mant - m) < 1e-6 then nice = true end end
    assert.is_true(nice, "step " .. step)
  end
  local lowest_legend = math.max(table.unpack(legend_y))
  assert.is_true(lowest_legend < math.min(table.unpack(curve_y)), "a curve runs under the legend")
end

describe("the demo's SVG curves", function()
  it("have whole epoch ticks, round value ticks and the legend clear of the curves", function()
    local path = os.tmpname()
    plot.write(path, { title = "t", panels = {
      { title = "loss", xlabel = "epoch", series = {
        { name = "train", points = { { 1, 0.52 }, { 2, 0.34 }, { 3, 0.30 } } },
        { name = "test", points = { { 1, 0.40 }, { 2, 0.33 }, { 3, 0.31 } } } } },
      { title = "accuracy", xlabel = "epoch", series = {
        { name = "train", points = { { 1, 0.81 }, { 2, 0.877 }, { 3, 0.90 } } },
        { name = "test", points = { { 1, 0.855 }, { 2, 0.88 }, { 3, 0.897 } } } } } } })
    local f = assert(io.open(path))
    local svg = f:read("a")
    f:close()
    os.remove(path)
    check_svg(svg)
    -- the epochs 1, 2, 3 in both panels, values from 0.3 to 0.6 and from 0.800 to 0.900
    local xs = {}
    for l in svg:gmatch('text%-anchor="middle">(%d+)</text>') do xs[#xs + 1] = l end
    assert.are.same({ "1", "2", "3", "1", "2", "3" }, xs)
    assert.truthy(svg:find(">0.3</text>", 1, true) and svg:find(">0.6</text>", 1, true), svg)
    assert.truthy(svg:find(">0.800</text>", 1, true) and svg:find(">0.900</text>", 1, true), svg)
  end)
end)

local data_dir = "/usr/share/datasets/fashion-mnist"
local have_data = io.open(data_dir .. "/train-images-idx3-ubyte.gz") ~= nil

describe("fashion-mnist demo (shortened)", function()
  if not have_data then
    pending("needs the Debian package dataset-fashion-mnist (CI installs it)")
    return
  end

  it("learns, and its checkpoint reloads to the same predictions", function()
    local out = os.tmpname()
    os.remove(out)
    local saved_arg = _G.arg
    _G.arg = { "--limit", "600", "--epochs", "3", "--batch", "32", "--out", out, "--quiet", "--lr", "3e-3" }
    local ok, res = pcall(dofile, "examples/fashion_mnist.lua")
    _G.arg = saved_arg
    assert(ok, res)
    local h = res.history.train
    assert.are.equal(3, #h)
    assert.is_true(h[3][2] < h[1][2], string.format("train loss did not fall: %g -> %g", h[1][2], h[3][2]))
    assert.is_true(res.accuracy > 0.5, "test accuracy " .. res.accuracy)
    -- a fresh model loaded from the checkpoint predicts exactly what the trained one does
    local fresh = res.Net()
    fresh:load_state_dict(lt.load(res.checkpoint).model)
    res.model:eval()
    fresh:eval()
    local x = res.test_inputs:narrow(1, 1, 50)
    local a = lt.no_grad(function() return res.model(x) end)
    local b = lt.no_grad(function() return fresh(x) end)
    assert.is_true(lt.equal(a, b))
    local f = io.open(out .. "/curves.svg")
    assert.is_truthy(f)
    local svg = f:read("a")
    f:close()
    assert.matches("<svg", svg)
    check_svg(svg)
    os.execute("rm -rf '" .. out .. "'")
  end)
end)
