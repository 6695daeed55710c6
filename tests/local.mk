# Every subcommand of phalanx answers --help; config check fails where the plugin would.
TESTS += tests/cli/help tests/cli/config tests/cli/plan-sim tests/ckptd/notify tests/ckptd/remote \
	tests/metrics/check tests/python/state_roundtrip
EXTRA_DIST += tests/cli/help tests/cli/config tests/cli/plan-sim tests/ckptd/notify tests/ckptd/remote tests/metrics/check \
	tests/python/state_roundtrip \
	tests/ckptd/daemon.py tests/metrics/rules_test.yml
# The placement simulator against step times worked out by hand.
TESTS += tests/bench/placement_sim_check
EXTRA_DIST += tests/bench/placement_sim_check tests/bench/placement_sim
# make install gives a plugstack line, plugin, unit and binaries that agree.
TESTS += tests/install/check
EXTRA_DIST += tests/install/check
# Cluster tests need root and a lab cluster: run by tests/quickstart, not by
# 'make check'. The PMIx probe is built with the tests.
check_PROGRAMS += tests/cluster/pmix_exchange
tests_cluster_pmix_exchange_SOURCES = tests/cluster/pmix_exchange.c
tests_cluster_pmix_exchange_LDADD = $(PMIX_LIBS)
# A worker's environment from the launcher's own code, for tests/gpu/set_device.py.
check_PROGRAMS += tests/gpu/worker_env
tests_gpu_worker_env_SOURCES = tests/gpu/worker_env.c
tests_gpu_worker_env_LDADD = $(PHX_LAUNCH_LIBS) common/libphxcommon.la $(SLURM_LIBS) $(JSONC_LIBS) $(CRYPTO_LIBS) -lpthread
# Folders that also hold build output are listed file by file: 'make dist'
# would copy the build tree's objects along with a whole folder.
EXTRA_DIST += tests/quickstart tests/demo .ci/run tests/gpu/run tests/gpu/set_device.py tests/gpu/pinned_save.py \
	tests/layout/check tests/torchrun.py \
	tests/stack/debian13 tests/torch_env.bash tests/security/preauth_flood.py tests/security/token_holder.py \
	tests/security/impostor_daemon.py tests/security/slow_partner.py \
	tests/bench/placement tests/bench/lab-cycle tests/bench/ckpt tests/bench/ckpt-commit \
	tests/bench/recovery tests/bench/launch tests/bench/launch_worker tests/bench/scale \
	tests/bench/launch_worker.py tests/bench/recovery_worker.py tests/bench/ckpt_dcp.py tests/bench/dcp_reshard.py \
	tests/cluster/lab tests/cluster/run tests/cluster/lib.bash tests/cluster/driver_jobs.bash \
	tests/cluster/launch_probe.py tests/cluster/rl_job.py tests/cluster/cuda_device.py tests/cluster/record_failure.py \
	tests/cluster/10-jobs.bats \
	tests/cluster/20-pmix.bats \
	tests/cluster/30-gres.bats \
	tests/cluster/40-spank.bats \
	tests/cluster/45-placement.bats \
	tests/cluster/46-blocks.bats \
	tests/cluster/47-devices.bats \
	tests/cluster/48-torchrun-env.bats \
	tests/cluster/50-health.bats \
	tests/cluster/60-isolation.bats \
	tests/cluster/70-launch.bats \
	tests/cluster/72-roles.bats tests/cluster/73-rl-roles.bats \
	tests/cluster/75-driver.bats \
	tests/cluster/76-preflight.bats \
	tests/cluster/77-driver-daemon.bats \
	tests/cluster/78-ckpt.bats \
	tests/cluster/79-check.bats \
	tests/cluster/80-ckptd.bats \
	tests/cluster/85-recovery.bats \
	tests/cluster/86-daemon-launch.bats \
	tests/cluster/90-failures.bats \
	tests/faults/faults.bash \
	tests/faults/10-faults.bats \
	tests/faults/20-requeue.bats \
	tests/faults/30-elastic-pipeline.bats \
	tests/faults/pipeline_train.py

# Placement benchmark (tests/bench/placement runs it): not part of 'make check'.
check_PROGRAMS += tests/bench/placement_bench
tests_bench_placement_bench_SOURCES = tests/bench/placement_bench.c
tests_bench_placement_bench_LDADD = $(PHX_PLACEMENT_LIBS) $(PHX_FUZZ_LDADD)
# Checkpoint benchmark (tests/bench/ckpt runs it).
check_PROGRAMS += tests/bench/ckpt_bench
tests_bench_ckpt_bench_SOURCES = tests/bench/ckpt_bench.c
tests_bench_ckpt_bench_LDADD = checkpoint/lib/libphalanx.la $(PHX_NODE_LIBS) $(PHX_FUZZ_LDADD)
# Simulated agents for the commit benchmark and the cluster test.
check_PROGRAMS += tests/bench/ckpt_sim
tests_bench_ckpt_sim_SOURCES = tests/bench/ckpt_sim.c
tests_bench_ckpt_sim_LDADD = $(PHX_PROTO_LIBS) $(PHX_FUZZ_LDADD)
