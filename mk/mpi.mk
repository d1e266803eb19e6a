# The Open MPI module behind lt.distributed (src/mpi/lmpi.c -> $(BUILD)/lantern/mpi.so).
# Included by the Makefile. Built by `all` only when mpicc is found (Debian: libopenmpi-dev and
# openmpi-bin), with the compiler and flags of the rest of the build and mpicc's own include
# and link flags; without it lt.distributed.init() says what to install. The module links
# core.so (found next to it through $ORIGIN) for the public C API, so core.so, liblantern.a and
# C hosts never link MPI. -z nodelete, as for core.so: its exit handler must outlive lua_close.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI_SO = $(BUILD)/lantern/mpi.so

ifneq ($(MPICC),)
MPI_CFLAGS = $(shell $(MPICC) -showme:compile)
MPI_LIBS = $(shell $(MPICC) -showme:link)
all: $(MPI_SO)
$(MPI_SO): src/mpi/lmpi.c include/lantern.h $(CORE_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(OPT) $(EXTRA_CFLAGS) $(MPI_CFLAGS) -shared -Wl,-z,nodelete \
	  -Wl,-rpath,'$$ORIGIN' $(EXTRA_LDFLAGS) -o $@ $< -L$(dir $(CORE_SO)) -l:core.so $(MPI_LIBS) -ldl

.PHONY: install-mpi uninstall-mpi
install: install-mpi
uninstall: uninstall-mpi
install-mpi: $(MPI_SO)
	install -d "$(DESTDIR)$(CMODDIR)/lantern"
	install -m 755 $(MPI_SO) "$(DESTDIR)$(CMODDIR)/lantern/mpi.so"
uninstall-mpi:
	rm -f "$(DESTDIR)$(CMODDIR)/lantern/mpi.so"
endif
