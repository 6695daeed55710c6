# Unit tests (cmocka): each links the part it tests and what that part uses.
# Static convenience archives pull in only the objects a test calls.
PHX_PLACEMENT_LIBS = placement/libphxplacement.la
PHX_HEALTH_LIBS = health/libphxhealth.la $(PHX_PLACEMENT_LIBS)
PHX_PROTO_LIBS = checkpoint/proto/libphxproto.la
PHX_NODE_LIBS = checkpoint/node/libphxnode.la $(PHX_PROTO_LIBS) $(PHX_PLACEMENT_LIBS)
PHX_CKPTD_LIBS = checkpoint/ckptd/libphxckptd.la $(PHX_PROTO_LIBS)
PHX_LAUNCH_LIBS = launcher/libphxlaunch.la $(PHX_HEALTH_LIBS)
PHX_AGENT_LIBS = launcher/agent/libphxagent.la $(PHX_LAUNCH_LIBS)
# What every unit test links last: common/, libslurm and cmocka.
PHX_UNIT_LDADD = common/libphxcommon.la $(SLURM_LIBS) $(CMOCKA_LIBS) $(JSONC_LIBS) $(CRYPTO_LIBS) -lpthread

if HAVE_CMOCKA
UNIT_TESTS = \
	tests/unit/test_log \
	tests/unit/test_file \
	tests/unit/test_rundir \
	tests/unit/test_runas \
	tests/unit/test_hostlist \
	tests/unit/test_token \
	tests/unit/test_rankmap \
	tests/unit/test_topo \
	tests/unit/test_yaml \
	tests/unit/test_conf \
	tests/unit/test_health \
	tests/unit/test_isolate \
	tests/unit/test_devfilter \
	tests/unit/test_layout \
	tests/unit/test_megatron \
	tests/unit/test_fabric \
	tests/unit/test_placement \
	tests/unit/test_launch_args \
	tests/unit/test_launch_env \
	tests/unit/test_launch_restart \
	tests/unit/test_launch_liveness \
	tests/unit/test_launch_heartbeat \
	tests/unit/test_preflight \
	tests/unit/test_ckpt_plan \
	tests/unit/test_ckpt_source \
	tests/unit/test_digest \
	tests/unit/test_digest_file \
	tests/unit/test_libphalanx_ckpt \
	tests/unit/test_ckpt_manifest \
	tests/unit/test_ckpt_wire \
	tests/unit/test_role_ledger \
	tests/unit/test_ckpt_client \
	tests/unit/test_ckpt_commit \
	tests/unit/test_ckpt_partner \
	tests/unit/test_ckpt_partner_io \
	tests/unit/test_ckpt_partner_server \
	tests/unit/test_ckptd_journal \
	tests/unit/test_launch_driver \
	tests/unit/test_driver_roles \
	tests/unit/test_driver_ledger \
	tests/unit/test_launch_roles \
	tests/unit/test_recovery_policy \
	tests/unit/test_requeue \
	tests/unit/test_goodput \
	tests/unit/test_progress \
	tests/unit/test_xid \
	tests/unit/test_launch_ckptd \
	tests/unit/test_xrdv
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)
noinst_HEADERS += tests/unit/scratch.h
# The NVML check dlopen()s a fake libnvidia-ml built here.
check_LTLIBRARIES += tests/unit/fake_nvml.la
tests_unit_fake_nvml_la_SOURCES = tests/unit/fake_nvml.c
tests_unit_fake_nvml_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere
tests_unit_test_health_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_NVML='"$(abs_top_builddir)/tests/unit/.libs/fake_nvml.so"'

tests_unit_test_log_SOURCES = tests/unit/test_log.c
tests_unit_test_log_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_file_SOURCES = tests/unit/test_file.c tests/unit/scratch.c
tests_unit_test_file_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_file_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=fsync
tests_unit_test_rundir_SOURCES = tests/unit/test_rundir.c tests/unit/scratch.c
tests_unit_test_rundir_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_runas_SOURCES = tests/unit/test_runas.c
tests_unit_test_runas_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_hostlist_SOURCES = tests/unit/test_hostlist.c
tests_unit_test_hostlist_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_token_SOURCES = tests/unit/test_token.c tests/unit/scratch.c
tests_unit_test_token_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_rankmap_SOURCES = tests/unit/test_rankmap.c
tests_unit_test_rankmap_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_topo_SOURCES = tests/unit/test_topo.c
tests_unit_test_topo_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_yaml_SOURCES = tests/unit/test_yaml.c
tests_unit_test_yaml_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_conf_SOURCES = tests/unit/test_conf.c
tests_unit_test_conf_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_health_SOURCES = tests/unit/test_health.c tests/unit/scratch.c
tests_unit_test_health_LDADD = $(PHX_HEALTH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_devfilter_SOURCES = tests/unit/test_devfilter.c spank/devfilter.c
tests_unit_test_devfilter_LDADD = $(PHX_UNIT_LDADD)
# Its own object: the plugin builds the same file with libtool.
tests_unit_test_devfilter_CPPFLAGS = $(AM_CPPFLAGS)
tests_unit_test_isolate_SOURCES = tests/unit/test_isolate.c
tests_unit_test_isolate_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_layout_SOURCES = tests/unit/test_layout.c
tests_unit_test_layout_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_megatron_SOURCES = tests/unit/test_megatron.c
tests_unit_test_megatron_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_fabric_SOURCES = tests/unit/test_fabric.c
tests_unit_test_fabric_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_placement_SOURCES = tests/unit/test_placement.c
tests_unit_test_placement_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_args_SOURCES = tests/unit/test_launch_args.c
tests_unit_test_launch_args_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_env_SOURCES = tests/unit/test_launch_env.c
tests_unit_test_launch_env_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_restart_SOURCES = tests/unit/test_launch_restart.c
tests_unit_test_launch_restart_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_liveness_SOURCES = tests/unit/test_launch_liveness.c
tests_unit_test_launch_liveness_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_heartbeat_SOURCES = tests/unit/test_launch_heartbeat.c
tests_unit_test_launch_heartbeat_LDADD = checkpoint/lib/libphalanx.la $(PHX_UNIT_LDADD)
tests_unit_test_preflight_SOURCES = tests/unit/test_preflight.c
tests_unit_test_preflight_LDADD = $(PHX_HEALTH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_plan_SOURCES = tests/unit/test_ckpt_plan.c
tests_unit_test_ckpt_plan_LDADD = $(PHX_NODE_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_source_SOURCES = tests/unit/test_ckpt_source.c
tests_unit_test_ckpt_source_LDADD = $(PHX_NODE_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_digest_SOURCES = tests/unit/test_digest.c
tests_unit_test_digest_LDADD = $(PHX_PROTO_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_digest_file_SOURCES = tests/unit/test_digest_file.c tests/unit/scratch.c
tests_unit_test_digest_file_LDADD = $(PHX_PROTO_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_libphalanx_ckpt_SOURCES = tests/unit/test_libphalanx_ckpt.c tests/unit/scratch.c
tests_unit_test_libphalanx_ckpt_LDADD = checkpoint/lib/libphalanx.la $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_manifest_SOURCES = tests/unit/test_ckpt_manifest.c tests/unit/scratch.c
tests_unit_test_ckpt_manifest_LDADD = $(PHX_PROTO_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_wire_SOURCES = tests/unit/test_ckpt_wire.c
tests_unit_test_ckpt_wire_LDADD = $(PHX_PROTO_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_role_ledger_SOURCES = tests/unit/test_role_ledger.c
tests_unit_test_role_ledger_LDADD = $(PHX_PROTO_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_client_SOURCES = tests/unit/test_ckpt_client.c
tests_unit_test_ckpt_client_LDADD = $(PHX_PROTO_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_commit_SOURCES = tests/unit/test_ckpt_commit.c
tests_unit_test_ckpt_commit_LDADD = $(PHX_CKPTD_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_partner_SOURCES = tests/unit/test_ckpt_partner.c
tests_unit_test_ckpt_partner_LDADD = $(PHX_NODE_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_partner_io_SOURCES = tests/unit/test_ckpt_partner_io.c
tests_unit_test_ckpt_partner_io_LDADD = $(PHX_NODE_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckpt_partner_server_SOURCES = tests/unit/test_ckpt_partner_server.c tests/unit/scratch.c
tests_unit_test_ckpt_partner_server_LDADD = $(PHX_NODE_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_ckptd_journal_SOURCES = tests/unit/test_ckptd_journal.c tests/unit/scratch.c
tests_unit_test_ckptd_journal_LDADD = $(PHX_CKPTD_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_driver_SOURCES = tests/unit/test_launch_driver.c
tests_unit_test_launch_driver_LDADD = launcher/driver/libphxdriver.la $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_driver_roles_SOURCES = tests/unit/test_driver_roles.c
tests_unit_test_driver_roles_LDADD = launcher/driver/libphxdriver.la $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_driver_ledger_SOURCES = tests/unit/test_driver_ledger.c
tests_unit_test_driver_ledger_LDADD = launcher/driver/libphxdriver.la $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_roles_SOURCES = tests/unit/test_launch_roles.c
tests_unit_test_launch_roles_LDADD = $(PHX_LAUNCH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_recovery_policy_SOURCES = tests/unit/test_recovery_policy.c
tests_unit_test_recovery_policy_LDADD = $(PHX_CKPTD_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_requeue_SOURCES = tests/unit/test_requeue.c
tests_unit_test_requeue_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_progress_SOURCES = tests/unit/test_progress.c cli/progress.c
tests_unit_test_progress_LDADD = $(PHX_UNIT_LDADD)
tests_unit_test_goodput_SOURCES = tests/unit/test_goodput.c
tests_unit_test_goodput_LDADD = $(PHX_CKPTD_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_xid_SOURCES = tests/unit/test_xid.c
tests_unit_test_xid_LDADD = $(PHX_HEALTH_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_launch_ckptd_SOURCES = tests/unit/test_launch_ckptd.c
tests_unit_test_launch_ckptd_LDADD = $(PHX_AGENT_LIBS) $(PHX_UNIT_LDADD)
tests_unit_test_xrdv_SOURCES = tests/unit/test_xrdv.c tests/unit/scratch.c
tests_unit_test_xrdv_LDADD = launcher/driver/libphxdriver.la $(PHX_AGENT_LIBS) $(PHX_UNIT_LDADD)
endif
