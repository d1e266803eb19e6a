# Installing Lantern, its reference docs, and checking its rock. Included by the Makefile.
#
#   make install PREFIX=/opt/lantern     Lua modules -> $(PREFIX)/share/lua/5.4/lantern/...
#                                        C module    -> $(PREFIX)/lib/lua/5.4/lantern/core.so
#                                        liblantern.a -> $(PREFIX)/lib, lantern.h and
#                                        lantern_ops.h -> $(PREFIX)/include
#                                        lantern.pc, lantern-core.pc (a host with no Lua)
#                                                    -> $(PREFIX)/lib/pkgconfig
#                                        the `lantern` command -> $(PREFIX)/bin
#   make docs                            LDoc reference in docs/api (Debian: lua-ldoc)
#   make rock-check                      `luarocks make` into a scratch tree, then require it
#   make embed-demo                      builds and runs examples/embed (C host, liblantern.a)
#   make embed-c-demo                    builds and runs examples/embed_c (C host with no Lua)
#
# DESTDIR is honoured (staged installs). The rock build (rockspec/lantern-scm-1.rockspec) calls
# `install` with ROCK=1 and luarocks' own directories, which installs only what a rock deploys.
PREFIX ?= /usr/local
LUA_V ?= 5.4
LUADIR ?= $(PREFIX)/share/lua/$(LUA_V)
CMODDIR ?= $(PREFIX)/lib/lua/$(LUA_V)
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include
PCDIR ?= $(LIBDIR)/pkgconfig
BINDIR ?= $(PREFIX)/bin
ROCK ?= 0
LT_VERSION = $(shell sed -n 's/^\#define LT_VERSION "\(.*\)"/\1/p' include/lantern.h)
LUA_INC_FLAGS = $(shell pkg-config --cflags lua$(LUA_V) 2>/dev/null || echo -I$(LUA_INC))
LUA_LIB_FLAGS = $(shell pkg-config --libs lua$(LUA_V) 2>/dev/null || echo -llua$(LUA_V))

.PHONY: install uninstall docs rock-check

install: all
	@set -e; for f in $(LUASRC); do \
	  rel=$${f#lua/}; install -d "$(DESTDIR)$(LUADIR)/$$(dirname $$rel)"; \
	  install -m 644 "$$f" "$(DESTDIR)$(LUADIR)/$$rel"; done
	install -d "$(DESTDIR)$(CMODDIR)/lantern"
	install -m 755 $(CORE_SO) "$(DESTDIR)$(CMODDIR)/lantern/core.so"
	install -d "$(DESTDIR)$(BINDIR)"
	{ echo '#!/usr/bin/env lua$(LUA_V)'; \
	  echo '-- lantern: the interactive session and script runner (lua/lantern/repl.lua).'; \
	  if [ "$(ROCK)" != 1 ]; then \
	    echo 'package.path = "$(LUADIR)/?.lua;$(LUADIR)/?/init.lua;" .. package.path'; \
	    echo 'package.cpath = "$(CMODDIR)/?.so;" .. package.cpath'; fi; \
	  echo 'os.exit(require("lantern.repl").main({...}))'; } > "$(DESTDIR)$(BINDIR)/lantern"
	chmod 755 "$(DESTDIR)$(BINDIR)/lantern"
ifneq ($(ROCK),1)
	install -d "$(DESTDIR)$(LIBDIR)" "$(DESTDIR)$(INCDIR)" "$(DESTDIR)$(PCDIR)"
	install -m 644 $(LIB_A) "$(DESTDIR)$(LIBDIR)/liblantern.a"
	install -m 644 include/lantern.h include/lantern_ops.h "$(DESTDIR)$(INCDIR)/"
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' \
	  -e 's|@VERSION@|$(LT_VERSION)|g' -e 's|@LUA_V@|$(LUA_V)|g' \
	  -e 's|@LUA_CFLAGS@|$(LUA_INC_FLAGS)|g' -e 's|@LUA_LIBS@|$(LUA_LIB_FLAGS)|g' -e 's|@LDLIBS@|$(LDLIBS)|g' \
	  tools/lantern.pc.in > "$(DESTDIR)$(PCDIR)/lantern.pc"
	# the same library for a host that calls only lt_* (lantern_ops.h): no Lua flags
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' \
	  -e 's|@VERSION@|$(LT_VERSION)|g' -e 's|@LUA_V@|$(LUA_V)|g' -e 's|^Name: lantern$$|Name: lantern-core|' \
	  -e 's|@LUA_CFLAGS@||g' -e 's|@LUA_LIBS@||g' -e 's|@LDLIBS@|$(LDLIBS)|g' \
	  tools/lantern.pc.in > "$(DESTDIR)$(PCDIR)/lantern-core.pc"
endif

uninstall:
	@for f in $(LUASRC); do rm -f "$(DESTDIR)$(LUADIR)/$${f#lua/}"; done
	rm -f "$(DESTDIR)$(CMODDIR)/lantern/core.so" "$(DESTDIR)$(BINDIR)/lantern" \
	  "$(DESTDIR)$(LIBDIR)/liblantern.a" "$(DESTDIR)$(INCDIR)/lantern.h" \
	  "$(DESTDIR)$(INCDIR)/lantern_ops.h" "$(DESTDIR)$(PCDIR)/lantern.pc" "$(DESTDIR)$(PCDIR)/lantern-core.pc"

# Reference docs from the LDoc comments in lua/lantern and the stubs in docs/api_core.lua
# (which document the functions written in C). config.ld says what goes in.
docs:
	@command -v ldoc >/dev/null || { echo "make docs needs LDoc (Debian: apt-get install lua-ldoc)"; exit 1; }
	rm -rf docs/api
	ldoc -c config.ld .
	@echo "reference written to docs/api/index.html"

# Builds and installs the rock into a scratch tree, then loads it with a plain lua5.4.
ROCK_TREE ?= /tmp/lantern-rock-check
rock-check:
	@command -v luarocks >/dev/null || { echo "make rock-check needs luarocks (Debian: apt-get install luarocks)"; exit 1; }
	rm -rf "$(ROCK_TREE)"
	luarocks --lua-version=$(LUA_V) make --tree="$(ROCK_TREE)" rockspec/lantern-scm-1.rockspec
	eval "$$(luarocks --lua-version=$(LUA_V) path --tree="$(ROCK_TREE)")" && cd /tmp && \
	  lua$(LUA_V) -e 'local lt = require "lantern"; local t = lt.ones(2, 3); assert(t:numel() == 6); print("rock ok: lantern " .. lt.__version .. " from " .. package.searchpath("lantern", package.path))'

# The C embedding example (examples/embed/embed.c) built against the static library, and run.
EMBED_DEMO = examples/embed/embed_demo
.PHONY: embed-demo
embed-demo: $(EMBED_DEMO)
	cd examples/embed && ./embed_demo model.pt 10000
$(EMBED_DEMO): examples/embed/embed.c include/lantern.h $(LIB_A)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iinclude $(LUA_INC_FLAGS) $< $(LIB_A) $(LUA_LIB_FLAGS) $(LDLIBS) -o $@

# The C host with no Lua (examples/embed_c/infer.c): liblantern.a and the core's libraries only,
# run on the MLP checkpoint that examples/embed_c/make_model.lua writes.
EMBED_C = $(BUILD)/examples/infer
EMBED_C_MODEL = $(BUILD)/examples/mlp.safetensors
.PHONY: embed-c-demo
embed-c-demo: $(EMBED_C) $(CORE_SO)
	bin/lantern examples/embed_c/make_model.lua $(EMBED_C_MODEL)
	$(EMBED_C) $(EMBED_C_MODEL) 0.5 -1.25 2 0.125  -0.75 0 1.5 -2.5
$(EMBED_C): examples/embed_c/infer.c include/lantern.h include/lantern_ops.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iinclude $< $(LIB_A) $(LDLIBS) -o $@
