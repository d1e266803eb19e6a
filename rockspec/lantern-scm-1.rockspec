-- LuaRocks spec for Lantern. From the repository root:
--   luarocks --lua-version=5.4 make --tree=/tmp/x rockspec/lantern-scm-1.rockspec
--   eval "$(luarocks --lua-version=5.4 path --tree=/tmp/x)"; lua5.4 -e 'require "lantern"'
-- It builds with the project's Makefile (C11 compiler, OpenMP, OpenBLAS, Lua 5.4 headers:
-- Debian packages build-essential libopenblas-dev liblua5.4-dev).
rockspec_format = "3.0"
package = "lantern"
version = "scm-1"

source = {
  url = "git+file://./lantern",   -- `luarocks make` builds the checkout it is run from
}

description = {
  summary = "Tensors, autograd and neural networks for Lua 5.4",
  detailed = [[
Lantern is a neural-network engine for Lua 5.4: a C11 tensor and reverse-mode autograd core
bound into Lua, with a PyTorch-shaped nn.Module, layers, losses, optimisers and data loading
written in Lua on top. It reads and writes PyTorch checkpoints and safetensors, comes with an
interactive session (the `lantern` command), and embeds in a C program through liblantern.a.
Positions are Lua's: dimensions and indices count from 1.
]],
  license = "MIT",
  labels = { "tensor", "autograd", "neural-network", "deep-learning" },
}

dependencies = {
  "lua >= 5.4, < 5.5",
}

build = {
  type = "make",
  build_target = "all",
  build_variables = {
    BUILD = "build-rock",
    CC = "$(CC)",
    LUA_INC = "$(LUA_INCDIR)",
  },
  install_target = "install",
  install_variables = {
    BUILD = "build-rock",
    ROCK = "1",
    PREFIX = "$(PREFIX)",
    LUADIR = "$(LUADIR)",
    CMODDIR = "$(LIBDIR)",
    BINDIR = "$(BINDIR)",
  },
}
