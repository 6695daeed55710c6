# spank_phalanx.so: loaded into every srun, slurmd and slurmstepd, so it links
# common, placement and health only, and the linker drops what it never calls.
spank_LTLIBRARIES = spank/spank_phalanx.la
spank_spank_phalanx_la_SOURCES = \
	spank/spank_phalanx.c \
	spank/options.c spank/options.h \
	spank/prolog.c spank/prolog.h \
	spank/rundirs.c spank/rundirs.h \
	spank/rootcause.c spank/rootcause.h \
	spank/isolate.c spank/isolate.h \
	spank/devfilter.c spank/devfilter.h \
	spank/local.c spank/local.h \
	spank/step.c spank/step.h \
	spank/task.c spank/task.h \
	spank/job_token.c spank/job_token.h
spank_spank_phalanx_la_LIBADD = health/libphxhealth.la placement/libphxplacement.la \
	common/libphxcommon.la
spank_spank_phalanx_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -Wl,--gc-sections \
	-Wl,--version-script=$(top_srcdir)/spank/spank_phalanx.map
EXTRA_spank_spank_phalanx_la_DEPENDENCIES = spank/spank_phalanx.map
# Slurm loads the .so by path; a libtool archive beside it is clutter.
install-data-hook:
	rm -f $(DESTDIR)$(spankdir)/spank_phalanx.la
uninstall-hook:
	rm -f $(DESTDIR)$(spankdir)/spank_phalanx.so
EXTRA_DIST += spank/spank_phalanx.map
