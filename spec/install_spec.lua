-- Packaging: `luarocks make` of rockspec/lantern-scm-1.rockspec into a scratch tree, after which
-- a plain lua5.4 with that tree's paths loads Lantern; and `make install PREFIX=...`, after
-- which the installed `lantern` command works and a C host builds with
-- `pkg-config --cflags --libs lantern`. Slow (the rock builds the project from scratch in
-- build-rock/ the first time), and not run under the sanitizers.
local cc = require "c.ccutil"
local shq = cc.shq

local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true end

-- Runs a shell command with the Lua paths and preloads of the test run removed; returns its
-- output (stdout and stderr) and whether it succeeded.
local function clean_sh(script)
  local cmd = "env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 -u LUA_INIT " ..
    "-u LD_PRELOAD sh -c " .. shq(script) .. " 2>&1"
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. shq(d)))
  return d
end

describe("packaging #slow #nosan", function()
  it("builds the rock with luarocks make, and a plain lua5.4 requires it from the tree", function()
    assert(have("luarocks"), "luarocks is not installed (Debian package luarocks; make setup installs it)")
    local tree = tmpdir()
    local out, ok = clean_sh(string.format(
      "luarocks --lua-version=5.4 make --tree=%s rockspec/lantern-scm-1.rockspec", shq(tree)))
    assert(ok, "luarocks make failed:\n" .. out)
    assert.truthy(out:find("lantern scm-1 is now installed", 1, true), out)

    out, ok = clean_sh(string.format([[
eval "$(luarocks --lua-version=5.4 path --tree=%s)" && cd /tmp &&
lua5.4 -e 'local lt = require "lantern"
print(package.searchpath("lantern", package.path))
print(package.searchpath("lantern.core", package.cpath))
print(lt.tensor{{1, 2}, {3, 4}}:float():matmul(lt.ones(2, 1)):sum():item())
print(lt.nn.Linear(2, 3).weight.shape[1])']], shq(tree)))
    assert(ok, out)
    assert.are.equal(table.concat({
      tree .. "/share/lua/5.4/lantern/init.lua",
      tree .. "/lib/lua/5.4/lantern/core.so",
      "10.0", "3", "" }, "\n"), out)

    -- the rock's `lantern` command
    out, ok = clean_sh(string.format("cd /tmp && %s -e 'print(lt.ones(3):sum():item(), arg[0])'",
      shq(tree .. "/bin/lantern")))
    assert(ok, out)
    assert.are.equal("3.0\tlantern\n", out)
    os.execute("rm -rf " .. shq(tree))
  end)

  it("installs into the default prefix where a stock lua5.4 looks", function()
    -- staged with DESTDIR: the files land where /usr/local would have them
    local stage = tmpdir()
    local out, ok = clean_sh(string.format("make -s BUILD=%s install DESTDIR=%s",
      shq(cc.build_dir), shq(stage)))
    assert(ok, "make install failed:\n" .. out)
    -- lua5.4's own search paths, each absolute template moved under the staging directory
    out, ok = clean_sh("lua5.4 -e 'print(package.path) print(package.cpath)'")
    assert(ok, out)
    local path, cpath = out:match("^([^\n]*)\n([^\n]*)\n$")
    local function staged(p)
      local t = {}
      for tpl in p:gmatch("[^;]+") do
        if tpl:sub(1, 1) == "/" then t[#t + 1] = stage .. tpl end
      end
      return table.concat(t, ";")
    end
    out, ok = clean_sh(string.format("cd /tmp && LUA_PATH=%s LUA_CPATH=%s lua5.4 -e " ..
      "'local lt = require \"lantern\" print(package.searchpath(\"lantern\", package.path)) " ..
      "print(package.searchpath(\"lantern.core\", package.cpath)) print(lt.ones(3):sum():item())'",
      shq(staged(path)), shq(staged(cpath))))
    assert(ok, out)
    assert.are.equal(stage .. "/usr/local/share/lua/5.4/lantern/init.lua\n" ..
      stage .. "/usr/local/lib/lua/5.4/lantern/core.so\n3.0\n", out)
    os.execute("rm -rf " .. shq(stage))
  end)

  it("installs with make install PREFIX=..., with a pkg-config file for C hosts", function()
    local prefix = tmpdir()
    local out, ok = clean_sh(string.format("make -s BUILD=%s install PREFIX=%s",
      shq(cc.build_dir), shq(prefix)))
    assert(ok, "make install failed:\n" .. out)
    for _, f in ipairs {
      "share/lua/5.4/lantern/init.lua", "share/lua/5.4/lantern/nn/init.lua",
      "share/lua/5.4/lantern/repl.lua", "lib/lua/5.4/lantern/core.so", "lib/liblantern.a",
      "include/lantern.h", "lib/pkgconfig/lantern.pc", "bin/lantern",
    } do
      assert(io.open(prefix .. "/" .. f, "rb"), "missing " .. f):close()
    end

    out, ok = clean_sh(string.format("cd /tmp && %s -e 'print(package.searchpath(\"lantern\", package.path))'",
      shq(prefix .. "/bin/lantern")))
    assert(ok, out)
    assert.are.equal(prefix .. "/share/lua/5.4/lantern/init.lua\n", out)

    -- a plain lua5.4 with the LUA_PATH and LUA_CPATH that README.md gives for $HOME/.local
    local f = assert(io.open("README.md"))
    local readme = f:read("a")
    f:close()
    local exports = {}
    for var, val in readme:gmatch('\nexport (LUA_C?PATH)="([^"\n]*)"') do
      exports[#exports + 1] = var .. "=" .. shq((val:gsub("%$HOME/%.local", prefix)))
    end
    assert.are.equal(2, #exports, "README.md should export LUA_PATH and LUA_CPATH")
    out, ok = clean_sh(string.format("cd /tmp && %s lua5.4 -e 'local lt = require \"lantern\" " ..
      "print(package.searchpath(\"lantern.core\", package.cpath)) print(lt.ones(2, 2):sum():item())'",
      table.concat(exports, " ")))
    assert(ok, out)
    assert.are.equal(prefix .. "/lib/lua/5.4/lantern/core.so\n4.0\n", out)

    -- a C host built only from the installed files, through pkg-config
    local exe = prefix .. "/embed"
    out, ok = clean_sh(string.format(
      "PKG_CONFIG_PATH=%s cc -std=c11 -O2 %s -o %s $(PKG_CONFIG_PATH=%s pkg-config --cflags --libs lantern)",
      shq(prefix .. "/lib/pkgconfig"), shq(cc.abspath("examples/embed/embed.c")), shq(exe),
      shq(prefix .. "/lib/pkgconfig")))
    assert(ok, "building examples/embed/embed.c with pkg-config failed:\n" .. out)
    local err, code
    out, err, code = cc.run(exe, { cc.abspath("examples/embed/model.pt"), 2000 })
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("ticks: 2000\n", 1, true), out)
    os.execute("rm -rf " .. shq(prefix))
  end)
end)
