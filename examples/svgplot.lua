--- A small SVG line-chart writer for training curves (no dependencies): whole-number ticks on
-- the x axis (epochs), round values on the y axis, the legend in a row above each plot.
-- plot.write(path, {title=..., panels={{title=, xlabel=, series={{name=, points={{x,y},...}}}}}})
local plot = {}

local colors = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd" }

local function esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end

-- A step of 1, 2, 2.5 or 5 times a power of ten giving about `n` intervals over `span`, and the
-- decimals its labels need.
local function nice_step(span, n)
  local raw = span / n
  local p = 10 ^ math.floor(math.log(raw, 10))
  local step = p
  for _, m in ipairs { 1, 2, 2.5, 5, 10 } do
    if m * p >= raw then step = m * p; break end
  end
  local decimals = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
  if math.abs(step / p - 2.5) < 1e-9 then decimals = decimals + 1 end
  return step, decimals
end

-- Value axis: from a multiple of the step at or below the data to one at or above it.
local function y_axis(lo, hi)
  if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
  local step, decimals = nice_step(hi - lo, 4)
  local y0 = math.floor(lo / step + 1e-9) * step
  local y1 = math.ceil(hi / step - 1e-9) * step
  local ticks = {}
  for i = 0, math.floor((y1 - y0) / step + 0.5) do ticks[#ticks + 1] = y0 + i * step end
  return y0, y1, ticks, decimals
end

-- Epoch axis: whole numbers only, half a unit of margin on each side.
local function x_axis(lo, hi)
  local step = math.max(1, math.ceil(nice_step(math.max(hi - lo, 1), 6)))
  local ticks = {}
  for v = math.ceil(lo), math.floor(hi) do
    if (v - math.ceil(lo)) % step == 0 then ticks[#ticks + 1] = v end
  end
  return lo - 0.5, hi + 0.5, ticks
end

local function panel(out, p, ox, oy, w, h)
  local xs, ys = {}, {}
  for _, s in ipairs(p.series) do
    for _, pt in ipairs(s.points) do xs[#xs + 1] = pt[1]; ys[#ys + 1] = pt[2] end
  end
  if #xs == 0 then return end
  local x0, x1, xticks = x_axis(math.min(table.unpack(xs)), math.max(table.unpack(xs)))
  local y0, y1, yticks, decimals = y_axis(math.min(table.unpack(ys)), math.max(table.unpack(ys)))
  -- the legend has a row of its own between the title and the plot, so no curve runs under it
  local L, R, T, B = 60, 20, 48, 40
  local function px(x) return ox + L + (x - x0) / (x1 - x0) * (w - L - R) end
  local function py(y) return oy + h - B - (y - y0) / (y1 - y0) * (h - T - B) end
  out[#out + 1] = string.format('<rect x="%d" y="%d" width="%d" height="%d" fill="white" stroke="#ccc"/>', ox, oy, w, h)
  out[#out + 1] = string.format('<text x="%g" y="%g" font-size="14" text-anchor="middle">%s</text>', ox + w / 2, oy + 18, esc(p.title or ""))
  for _, yv in ipairs(yticks) do
    out[#out + 1] = string.format('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#eee"/>', px(x0), py(yv), px(x1), py(yv))
    out[#out + 1] = string.format('<text x="%g" y="%g" font-size="10" text-anchor="end">%.' .. decimals .. 'f</text>', ox + L - 4, py(yv) + 3, yv)
  end
  for _, xv in ipairs(xticks) do
    out[#out + 1] = string.format('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#eee"/>', px(xv), py(y0), px(xv), py(y1))
    out[#out + 1] = string.format('<text x="%g" y="%g" font-size="10" text-anchor="middle">%d</text>', px(xv), oy + h - B + 14, xv)
  end
  out[#out + 1] = string.format('<text x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>', ox + w / 2, oy + h - 6, esc(p.xlabel or ""))
  local lx = ox + L
  for si, s in ipairs(p.series) do
    local pts = {}
    for _, pt in ipairs(s.points) do pts[#pts + 1] = string.format("%.2f,%.2f", px(pt[1]), py(pt[2])) end
    local c = colors[(si - 1) % #colors + 1]
    out[#out + 1] = string.format('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>', c, table.concat(pts, " "))
    if #s.points < 30 then
      for _, pt in ipairs(s.points) do
        out[#out + 1] = string.format('<circle cx="%.2f" cy="%.2f" r="2.5" fill="%s"/>', px(pt[1]), py(pt[2]), c)
      end
    end
    local ly = oy + 32
    out[#out + 1] = string.format('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"/>', lx, ly - 4, lx + 18, ly - 4, c)
    out[#out + 1] = string.format('<text x="%g" y="%g" font-size="11" fill="%s">%s</text>', lx + 22, ly, c, esc(s.name))
    lx = lx + 30 + 7 * #tostring(s.name) + 16
  end
end

function plot.write(path, spec)
  local w, h = 520, 320
  local n = #spec.panels
  local out = { string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">', w * n, h + 30) }
  out[#out + 1] = string.format('<text x="%d" y="20" font-size="16" text-anchor="middle">%s</text>', w * n / 2, esc(spec.title or ""))
  for i, p in ipairs(spec.panels) do panel(out, p, (i - 1) * w, 30, w, h) end
  out[#out + 1] = "</svg>"
  local f = assert(io.open(path, "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
end

return plot
