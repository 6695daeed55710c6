# launcher/: phalanx-launch. This folder's library is what both modes share
# and what needs no process: options, roles, restart decisions, straggler
# statistics, the workers' environment, output lines and the agents' result
# lines; agent/ runs a node's workers, driver/ runs the job's steps.
noinst_LTLIBRARIES += launcher/libphxlaunch.la
launcher_libphxlaunch_la_SOURCES = launcher/launch.h \
	launcher/options.c launcher/options_driver.c launcher/options.h \
	launcher/role.c launcher/role.h launcher/restart.c launcher/restart.h \
	launcher/straggler.c launcher/straggler.h launcher/env.c launcher/env.h \
	launcher/output.c launcher/output.h launcher/result.c launcher/result.h

# The node agent: PMIx wire-up, workers, supervision, restarts, the checkpoint
# engine's glue, the phalanx-ckptd link, the Xid watch.
noinst_LTLIBRARIES += launcher/agent/libphxagent.la
launcher_agent_libphxagent_la_SOURCES = launcher/agent/agent.h \
	launcher/agent/agent_pmix.c launcher/agent/agent_pmix.h \
	launcher/agent/agent_spawn.c launcher/agent/agent_evidence.c launcher/agent/agent_workers.h \
	launcher/agent/agent_supervise.c \
	launcher/agent/agent_result.c launcher/agent/agent_result.h \
	launcher/agent/agent_preempt.c launcher/agent/agent_preempt.h \
	launcher/agent/agent_rates.c launcher/agent/agent_rates.h \
	launcher/agent/agent_ckpt.c launcher/agent/agent_ckpt_partner.c launcher/agent/agent_ckpt.h \
	launcher/agent/agent_ckptd.c launcher/agent/agent_ckptd.h launcher/agent/agent_ckptd_int.h \
	launcher/agent/agent_ckptd_ckpt.c launcher/agent/agent_ckptd_sig.c \
	launcher/agent/agent_xid.c launcher/agent/agent_xid.h

# The batch script's driver: steps, bad nodes, spares, requeues.
noinst_LTLIBRARIES += launcher/driver/libphxdriver.la
launcher_driver_libphxdriver_la_SOURCES = launcher/driver/driver.h \
	launcher/driver/driver.c launcher/driver/driver_plan.c launcher/driver/driver_plan.h \
	launcher/driver/driver_trust.c launcher/driver/driver_preflight.c \
	launcher/driver/driver_preflight.h \
	launcher/driver/driver_ckptd.c launcher/driver/driver_ckptd.h

bin_PROGRAMS += launcher/phalanx-launch
launcher_phalanx_launch_SOURCES = launcher/launch.c
launcher_phalanx_launch_LDADD = launcher/agent/libphxagent.la launcher/driver/libphxdriver.la \
	launcher/libphxlaunch.la checkpoint/node/libphxnode.la checkpoint/proto/libphxproto.la \
	health/libphxhealth.la placement/libphxplacement.la common/libphxcommon.la \
	$(SLURM_LIBS) $(PMIX_LIBS)
