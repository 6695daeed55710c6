# common/: only what several parts share: logging, files and run directories,
# work done as a job's user, torch's error files,
# YAML and the configuration, host lists, hex text, tokens, GPU lists, the
# Slurm glue (draining a node, planning a requeue), saturating arithmetic,
# the clock.
noinst_LTLIBRARIES += common/libphxcommon.la
common_libphxcommon_la_SOURCES = \
	common/log.c common/log.h \
	common/clock.c common/clock.h \
	common/file.c common/file.h \
	common/rundir.c common/rundir.h \
	common/runas.c common/runas.h \
	common/errfile.c common/errfile.h \
	common/hostlist.c common/hostlist.h \
	common/hex.c common/hex.h \
	common/token.c common/token.h \
	common/yaml.c common/yaml.h \
	common/conf.c common/conf.h \
	common/gpulist.c common/gpulist.h \
	common/drain.c common/drain.h \
	common/requeue.c common/requeue.h \
	common/slurm_compat.c common/slurm_compat.h \
	common/saturate.h
# libslurm is resolved at load time inside srun/slurmstepd, so it is linked
# into the programs, never into a convenience library.
common_libphxcommon_la_LIBADD = $(YAML_LIBS) $(JSONC_LIBS) $(CRYPTO_LIBS) -lpthread -lm
