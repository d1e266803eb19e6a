# The CUDA plugin (src/cuda/ -> $(BUILD)/lantern/cuda.so), which core.so dlopens on the first use
# of a "cuda" device (src/cuda_plugin.c; the bridge is src/cuda/plugin.h). Included by the
# Makefile. `make cuda` builds it; `all` builds it too when nvcc is found, except in sanitizer
# builds (EXTRA_CFLAGS with -fsanitize), whose runs then see "the CUDA plugin is not built".
# Without nvcc this file defines nothing but a `cuda` target that says what is missing, so CI on
# a machine without CUDA is unaffected. The plugin links the CUDA runtime dynamically (found
# through an rpath to the toolkit's lib64, then the loader's path): without it, the dlopen fails
# and lt.cuda.unavailable_reason() quotes the loader.
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(wildcard $(CUDA_HOME)/bin/nvcc)
CUDA_ARCH ?= -gencode arch=compute_90,code=[sm_90,compute_90]
CUDA_SO = $(BUILD)/lantern/cuda.so
CUDA_C = $(wildcard src/cuda/*.c)
CUDA_CU = $(wildcard src/cuda/*.cu)
CUDA_H = $(wildcard src/cuda/*.h)
CUDA_OBJ = $(CUDA_C:%.c=$(BUILD)/%.o) $(CUDA_CU:%.cu=$(BUILD)/%.cu.o)

# the core's files that include the bridge header (HDR does not list src/cuda/)
$(BUILD)/src/device.o $(BUILD)/src/cuda_plugin.o $(BUILD)/src/bind/l_cuda.o \
  $(BUILD)/src/bind/l_device.o: src/cuda/plugin.h

.PHONY: cuda
ifneq ($(NVCC),)
ifeq ($(findstring -fsanitize,$(EXTRA_CFLAGS)),)
all: $(CUDA_SO)
endif
cuda: $(CUDA_SO)

$(BUILD)/src/cuda/%.o: src/cuda/%.c $(CUDA_H) $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(OPT) -I$(CUDA_HOME)/include -c $< -o $@
$(BUILD)/src/cuda/%.cu.o: src/cuda/%.cu $(CUDA_H)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
	  -c $< -o $@
# -z nodelete: the cache's blocks and the runtime outlive every state
$(CUDA_SO): $(CUDA_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-z,nodelete -Wl,-z,defs -o $@ $(CUDA_OBJ) -L$(CUDA_HOME)/lib64 \
	  -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++ -lm -lpthread
else
cuda:
	@echo "make cuda: nvcc not found (looked in $(CUDA_HOME)/bin; set CUDA_HOME or NVCC)"; exit 1
endif
