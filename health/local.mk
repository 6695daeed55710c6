# health/: node health checks (the prolog's and phalanx health), judging
# GPU/NCCL preflight results, GPU Xid records.
noinst_LTLIBRARIES += health/libphxhealth.la
health_libphxhealth_la_SOURCES = \
	health/health.c health/health.h \
	health/preflight.c health/preflight.h health/preflight_json.c \
	health/preflight_run.c health/preflight_drain.c \
	health/xid.c health/xid.h
health_libphxhealth_la_LIBADD = $(JSONC_LIBS)
