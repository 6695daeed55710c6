# libphalanx: the trainer's API; exports only phx_* (version script).
lib_LTLIBRARIES += checkpoint/lib/libphalanx.la
checkpoint_lib_libphalanx_la_SOURCES = checkpoint/lib/libphalanx.c \
	checkpoint/lib/libphalanx_ckpt.c checkpoint/lib/libphalanx_int.h \
	checkpoint/proto/ckpt_msg.h checkpoint/proto/heartbeat.h
checkpoint_lib_libphalanx_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -no-undefined \
	-Wl,--version-script=$(top_srcdir)/checkpoint/lib/libphalanx.map
EXTRA_checkpoint_lib_libphalanx_la_DEPENDENCIES = checkpoint/lib/libphalanx.map
EXTRA_DIST += checkpoint/lib/libphalanx.map

# The Python binding: ctypes over libphalanx, no compilation step.
PHX_PY_SOURCES = checkpoint/python/phalanx/__init__.py checkpoint/python/phalanx/dcp.py \
	checkpoint/python/phalanx/pytorch.py
EXTRA_DIST += $(PHX_PY_SOURCES)
if HAVE_PYTHON
phalanxpydir = $(pythondir)/phalanx
phalanxpy_PYTHON = $(PHX_PY_SOURCES)
nodist_phalanxpy_PYTHON = checkpoint/python/phalanx/_paths.py
# Where the binding finds libphalanx once installed.
checkpoint/python/phalanx/_paths.py: Makefile
	$(MKDIR_P) checkpoint/python/phalanx
	printf '# Written by make install.\nLIBDIR = "%s"\n' '$(libdir)' >$@
CLEANFILES += checkpoint/python/phalanx/_paths.py
endif
