# Fuzz targets: libFuzzer entry points. With gcc they are linked to a small
# driver that replays the seed corpus and random mutations of it (smoke);
# tests/fuzz/run builds them with clang -fsanitize=fuzzer for real fuzzing.
# Each links the part whose parser it feeds (variables in tests/unit/local.mk).
PHX_FUZZ_LDADD = common/libphxcommon.la $(SLURM_LIBS) $(JSONC_LIBS) $(CRYPTO_LIBS) -lpthread
FUZZ_TARGETS = \
	tests/fuzz/fuzz_conf \
	tests/fuzz/fuzz_topo \
	tests/fuzz/fuzz_hostlist \
	tests/fuzz/fuzz_gpulist \
	tests/fuzz/fuzz_layout \
	tests/fuzz/fuzz_fabric \
	tests/fuzz/fuzz_check \
	tests/fuzz/fuzz_ckpt \
	tests/fuzz/fuzz_manifest \
	tests/fuzz/fuzz_ckpt_wire \
	tests/fuzz/fuzz_partner \
	tests/fuzz/fuzz_ckptd_journal \
	tests/fuzz/fuzz_result \
	tests/fuzz/fuzz_role \
	tests/fuzz/fuzz_role_ledger \
	tests/fuzz/fuzz_xid \
	tests/fuzz/fuzz_errfile \
	tests/fuzz/fuzz_xrdv
check_PROGRAMS += $(FUZZ_TARGETS)
TESTS += $(FUZZ_TARGETS)
noinst_HEADERS += tests/fuzz/fuzz.h tests/rng.h
tests_fuzz_fuzz_conf_SOURCES = tests/fuzz/fuzz_conf.c tests/fuzz/driver.c
tests_fuzz_fuzz_conf_LDADD = $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_topo_SOURCES = tests/fuzz/fuzz_topo.c tests/fuzz/driver.c
tests_fuzz_fuzz_topo_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_hostlist_SOURCES = tests/fuzz/fuzz_hostlist.c tests/fuzz/driver.c
tests_fuzz_fuzz_hostlist_LDADD = $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_gpulist_SOURCES = tests/fuzz/fuzz_gpulist.c tests/fuzz/driver.c
tests_fuzz_fuzz_gpulist_LDADD = $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_layout_SOURCES = tests/fuzz/fuzz_layout.c tests/fuzz/driver.c
tests_fuzz_fuzz_layout_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_fabric_SOURCES = tests/fuzz/fuzz_fabric.c tests/fuzz/driver.c
tests_fuzz_fuzz_fabric_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_check_SOURCES = tests/fuzz/fuzz_check.c tests/fuzz/driver.c
tests_fuzz_fuzz_check_LDADD = $(PHX_HEALTH_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_ckpt_SOURCES = tests/fuzz/fuzz_ckpt.c tests/fuzz/driver.c
tests_fuzz_fuzz_ckpt_LDADD = $(PHX_NODE_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_manifest_SOURCES = tests/fuzz/fuzz_manifest.c tests/fuzz/driver.c
tests_fuzz_fuzz_manifest_LDADD = $(PHX_PROTO_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_ckpt_wire_SOURCES = tests/fuzz/fuzz_ckpt_wire.c tests/fuzz/driver.c
tests_fuzz_fuzz_ckpt_wire_LDADD = $(PHX_PROTO_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_partner_SOURCES = tests/fuzz/fuzz_partner.c tests/fuzz/driver.c
tests_fuzz_fuzz_partner_LDADD = $(PHX_NODE_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_ckptd_journal_SOURCES = tests/fuzz/fuzz_ckptd_journal.c tests/fuzz/driver.c
tests_fuzz_fuzz_ckptd_journal_LDADD = $(PHX_CKPTD_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_result_SOURCES = tests/fuzz/fuzz_result.c tests/fuzz/driver.c
tests_fuzz_fuzz_result_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_role_SOURCES = tests/fuzz/fuzz_role.c tests/fuzz/driver.c
tests_fuzz_fuzz_role_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_role_ledger_SOURCES = tests/fuzz/fuzz_role_ledger.c tests/fuzz/driver.c
tests_fuzz_fuzz_role_ledger_LDADD = $(PHX_PROTO_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_xid_SOURCES = tests/fuzz/fuzz_xid.c tests/fuzz/driver.c
tests_fuzz_fuzz_xid_LDADD = $(PHX_HEALTH_LIBS) $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_errfile_SOURCES = tests/fuzz/fuzz_errfile.c tests/fuzz/driver.c
tests_fuzz_fuzz_errfile_LDADD = $(PHX_FUZZ_LDADD)
tests_fuzz_fuzz_xrdv_SOURCES = tests/fuzz/fuzz_xrdv.c tests/fuzz/driver.c
tests_fuzz_fuzz_xrdv_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_FUZZ_LDADD)
AM_TESTS_ENVIRONMENT = PHX_FUZZ_CORPUS='$(abs_top_srcdir)/tests/fuzz/corpus'; \
	PHX_TEST_DATA='$(abs_top_srcdir)/tests/data'; \
	LSAN_OPTIONS='suppressions=$(abs_top_srcdir)/tests/lsan.supp'; \
	export PHX_FUZZ_CORPUS PHX_TEST_DATA LSAN_OPTIONS;
EXTRA_DIST += tests/fuzz/corpus tests/fuzz/run tests/data tests/lsan.supp
