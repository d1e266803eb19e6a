#!/usr/bin/env bash
# The GPU machine's one check (issue 17): that machine has the CUDA toolkit and a GPU but no
# Lua, OpenBLAS, busted or package registry, so they travel as Debian packages.
#   tools/gpu-check.sh fetch   here: apt-get download them into build/gpu-debs (carry build/)
#   tools/gpu-check.sh         there (or here): unpacks build/gpu-debs with dpkg -x when the
#                              tools are missing, then runs the cuda spec, the per-device op
#                              suite on cuda and prints figures; without a GPU it runs the
#                              no-GPU checks and says which parts it skipped.
set -u
cd "$(dirname "$0")/.."
DEBS=build/gpu-debs
PKGS="lua5.4 liblua5.4-0 libopenblas0 libopenblas0-pthread libgfortran5 lua-busted lua-cliargs
      lua-dkjson lua-luassert lua-mediator lua-penlight lua-say lua-system lua-term zlib1g"

if [ "${1:-}" = fetch ]; then
  mkdir -p "$DEBS" && cd "$DEBS" && apt-get download $PKGS
  exit $?
fi

if ! command -v lua5.4 >/dev/null || ! command -v busted >/dev/null; then
  root=$PWD/build/gpu-root
  mkdir -p "$root"
  for d in "$DEBS"/*.deb; do [ -e "$d" ] && dpkg -x "$d" "$root"; done
  export PATH="$root/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
  export LUA_PATH="$root/usr/share/lua/5.4/?.lua;$root/usr/share/lua/5.4/?/init.lua;;"
  export LUA_CPATH="$root/usr/lib/x86_64-linux-gnu/lua/5.4/?.so;;"
  # Debian's busted script starts with #!/usr/bin/lua5.x; run its module with our lua5.4
  if ! command -v busted >/dev/null; then
    mkdir -p "$root/bin"
    printf '#!/bin/sh\nexec lua5.4 -e "require(\\"busted.runner\\")({standalone = false})" "$@"\n' >"$root/bin/busted"
    chmod +x "$root/bin/busted"
    export PATH="$root/bin:$PATH"
  fi
fi

command -v lua5.4 >/dev/null || { echo "gpu-check: no lua5.4 (run 'tools/gpu-check.sh fetch' here first)"; exit 1; }
[ -e build/lantern/core.so ] || { echo "gpu-check: no build/lantern/core.so (carry build/)"; exit 1; }
echo "== machine"
grep -m1 'model name' /proc/cpuinfo
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
bin/lantern -e 'local c = require("lantern").cuda
print("lt.cuda.is_available()", c.is_available(), "device_count", c.device_count(),
      "reason", c.unavailable_reason())'
gpu=$(bin/lantern -e 'io.write(require("lantern").cuda.is_available() and 1 or 0)')

status=0
echo "== spec/cuda_spec.lua"
bin/lantern-busted spec/cuda_spec.lua || status=1
if [ "$gpu" = 1 ]; then
  echo "== per-device op suite on cuda (entries without kernels are expected to fail)"
  LANTERN_DEVICE=cuda timeout 240 bin/lantern-busted --tags=device spec/device_ops_spec.lua -o TAP \
    >build/gpu-ops.tap 2>&1
  echo "ok: $(grep -c '^ok ' build/gpu-ops.tap)  not ok: $(grep -c '^not ok ' build/gpu-ops.tap)"
  grep -A3 '^not ok ' build/gpu-ops.tap | grep -o 'not implemented on cuda[^"]*\|^not ok.*' | head -60
  echo "== figures (float32 elementwise add, cuda vs cpu; memory stats)"
  bin/lantern -e '
local lt = require "lantern"
local function time(f, n) f(); lt.cuda.synchronize(); local t0 = os.clock()
  for _ = 1, n do f() end; lt.cuda.synchronize(); return (os.clock() - t0) / n end
for _, n in ipairs({ 1000, 1000000, 16000000 }) do
  local a, b = lt.randn(n), lt.randn(n)
  local da, db = a:to("cuda"), b:to("cuda")
  local tc = time(function() return a + b end, 20)
  local tg = time(function() return da + db end, 20)
  print(string.format("add n=%-9d cpu %.3f ms  cuda %.3f ms (host clock)", n, tc * 1e3, tg * 1e3))
end
for k, v in pairs(lt.cuda.memory_stats()) do print(k, v) end'
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 - <<'PY'
import time, torch
for n in (1000, 1000000, 16000000):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    a + b; torch.cuda.synchronize(); t0 = time.process_time()
    for _ in range(20): a + b
    torch.cuda.synchronize(); print("torch add n=%-9d cuda %.3f ms" % (n, (time.process_time() - t0) / 20 * 1e3))
PY
  fi
else
  echo "== no CUDA device: skipped the op suite on cuda, the figures and the training checks"
fi
echo "gpu-check: done (status $status)"
exit $status
