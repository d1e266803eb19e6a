# Lantern build. `make` builds the Lua C module and the static library; `make test` runs the
# busted suite; `make check` runs it under AddressSanitizer + UBSan; `make bench` benchmarks.
LUA_INC ?= /usr/include/lua5.4
CC ?= cc
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -fvisibility=hidden -fno-semantic-interposition \
              -Iinclude -I$(LUA_INC)
OPT ?= -O3 -march=x86-64-v2 -fno-math-errno
LDLIBS = -lopenblas -lz -lm -lpthread

SRC = $(wildcard src/*.c src/cpu/*.c src/bind/*.c src/serial/*.c)
HDR = $(wildcard include/*.h src/*.h src/cpu/*.h src/bind/*.h src/serial/*.h)
LUASRC = $(shell find lua -name '*.lua' | sort)

BUILD ?= build
OBJ = $(SRC:%.c=$(BUILD)/%.o) $(BUILD)/luasrc.o
CORE_SO = $(BUILD)/lantern/core.so
LIB_A = $(BUILD)/liblantern.a

.PHONY: all test check bench demo setup clean
all: $(CORE_SO) $(LIB_A)

$(BUILD)/%.o: %.c $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(OPT) $(KERNEL_CFLAGS) $(EXTRA_CFLAGS) -c $< -o $@

# The float32 transcendentals (src/cpu/vmath.h) compute every branch and then select; GCC
# vectorises that only when it may evaluate a floating-point operation the C code would not (no
# trap is ever enabled here). Their AVX2/AVX-512 builds fuse a * b + c into FMAs (the baseline
# has none, and float64 kernels are baseline code). nn.c: the cross_entropy rows; regress.c:
# binary_cross_entropy_with_logits; search.c: the column search's compares and selects.
VMATH_OBJ = $(addprefix $(BUILD)/src/cpu/,binary.o unary.o ternary.o softmax.o attention.o nn.o gelu.o \
            gelu_avx512.o regress.o search.o conv_dw.o)
$(VMATH_OBJ): KERNEL_CFLAGS = -fno-trapping-math -ffp-contract=fast

# The Lua half compiled into the library, so `lantern_open` needs no files on disk, with the
# reference text of the doc comments (what LDoc reads) that the session's help() shows.
DOCSRC = $(wildcard docs/api_*.lua)
HELPDATA = $(BUILD)/helpdata.lua
$(HELPDATA): $(LUASRC) $(DOCSRC) tools/gen_help.lua
	@mkdir -p $(BUILD)
	lua5.4 tools/gen_help.lua $(LUASRC) $(DOCSRC) > $@.tmp && mv $@.tmp $@
$(BUILD)/luasrc.c: $(LUASRC) $(HELPDATA) tools/embed_lua.lua
	@mkdir -p $(BUILD)
	lua5.4 tools/embed_lua.lua $(LUASRC) lantern.helpdata=$(HELPDATA) > $@.tmp && mv $@.tmp $@
$(BUILD)/luasrc.o: $(BUILD)/luasrc.c
	$(CC) $(CFLAGS_BASE) -O1 -w -c $< -o $@

# -z nodelete: the worker pool's threads outlive lua_close, so the module must never be unloaded.
# -Bsymbolic-functions: calls between Lantern's own exported functions skip the PLT.
$(CORE_SO): $(OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-z,nodelete -Wl,-Bsymbolic-functions $(EXTRA_LDFLAGS) -o $@ $(OBJ) $(LDLIBS)

$(LIB_A): $(OBJ)
	rm -f $@ && ar rcs $@ $(OBJ)   # afresh: a deleted source must not stay in the archive

# Installs missing Debian packages when run as root; otherwise names them.
PKGS = lua5.4 liblua5.4-dev libopenblas-dev zlib1g-dev lua-busted pkg-config lua-readline luarocks \
       lua-ldoc lua-markdown libopenmpi-dev openmpi-bin
setup:
	@missing=""; for p in $(PKGS) $(EXTRA_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "Lantern needs these Debian packages:$$missing (run: sudo apt-get install$$missing)"; exit 1; fi; fi

# Each of test, bench and demo may be the first command on a fresh machine, so the build runs
# only after setup has installed the headers it needs (as a prerequisite beside setup it would
# start at once under -j, and fail on a missing zlib.h).
test: setup
	$(MAKE) all
	bin/lantern-busted

# The per-device op suite: every entry of the device's kernel table, forward and backward,
# against a plain-Lua reference (spec/device_ops_spec.lua, which `make test` runs too).
LANTERN_DEVICE ?= cpu
.PHONY: test-device
test-device: setup
	$(MAKE) all
	LANTERN_DEVICE=$(LANTERN_DEVICE) bin/lantern-busted --tags=device spec/device_ops_spec.lua

check: setup
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" all
	LANTERN_BUILD=build-asan LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=$(CURDIR)/tools/lsan.supp:print_suppressions=0 \
	  bin/lantern-busted --exclude-tags=nosan

bench: setup
	$(MAKE) all $(BUILD)/bench/bare.so
	bin/lantern bench/run.lua 1
	bin/lantern bench/run.lua 2 small_add add_16m gemm mlp lenet demo conv act_1m char_mlp gpt train_cpu
	bin/lantern bench/mem.lua 2
	bin/lantern bench/ddp.lua 30

# the bare OpenBLAS sgemm that bench/run.lua measures beside Lantern's matmul, in-process
$(BUILD)/bench/bare.so: bench/bare.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -fPIC -I$(LUA_INC) -shared -o $@ $< -lopenblas

# README's first command: trains the Fashion-MNIST CNN (installs the dataset package).
# DEMO_ARGS passes options to the script, e.g. make demo DEMO_ARGS="--epochs 1 --limit 2000".
DEMO_ARGS ?=
demo:
	$(MAKE) setup EXTRA_PKGS=dataset-fashion-mnist
	$(MAKE) all
	bin/lantern examples/fashion_mnist.lua $(DEMO_ARGS)

clean:
	rm -rf build build-asan

-include mk/install.mk
-include mk/mpi.mk
-include mk/cuda.mk
