--- A small SVG line-chart writer for training curves (no dependencies).
-- plot.write(path, {title=..., panels={{title=, xlabel=, series={{name=, points={{x,y},...}}}}}})
local plot = {}

local colors = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd" }

local function esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end

local function nice_range(lo, hi)
  if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
  local pad = (hi - lo) * 0.05
  return lo - pad, hi + pad
end

local function panel(out, p, ox, oy, w, h)
  local xs, ys = {}, {}
  for _, s in ipairs(p.series) do
    for _, pt in ipairs(s.points) do xs[#xs + 1] = pt[1]; ys[#ys + 1] = pt[2] end
  end
  if #xs == 0 then return end
  local x0, x1 = nice_range(math.min(table.unpack(xs)), math.max(table.unpack(xs)))
  local y0, y1 = nice_range(math.min(table.unpack(ys)), math.max(table.unpack(ys)))
  local L, R, T, B = 60, 20, 30, 40
  local function px(x) return ox + L + (x - x0) / (x1 - x0) * (w - L - R) end
  local function py(y) return oy + h - B - (y - y0) / (y1 - y0) * (h - T - B) end
  out[#out + 1] = string.format('<rect x="%d" y="%d" width="%d" height="%d" fill="white" stroke="#ccc"/>', ox, oy, w, h)
  out[#out + 1] = string.format('<text x="%g" y="%g" font-size="14" text-anchor="middle">%s</text>', ox + w / 2, oy + 18, esc(p.title or ""))
  for i = 0, 4 do
    local yv = y0 + (y1 - y0) * i / 4
    out[#out + 1] = string.format('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#eee"/>', px(x0), py(yv), px(x1), py(yv))
    out[#out + 1] = string.format('<text x="%g" y="%g" font-size="10" text-anchor="end">%.3g</text>', ox + L - 4, py(yv) + 3, yv)
    local xv = x0 + (x1 - x0) * i / 4
    out[#out + 1] = string.format('<text x="%g" y="%g" font-size="10" text-anchor="middle">%.3g</text>', px(xv), oy + h - B + 14, xv)
  end
  out[#out + 1] = string.format('<text x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>', ox + w / 2, oy + h - 6, esc(p.xlabel or ""))
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
    out[#out + 1] = string.format('<text x="%g" y="%g" font-size="11" fill="%s">%s</text>', ox + w - R - 120, oy + T + 14 * si, c, esc(s.name))
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
