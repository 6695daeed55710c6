# launcher/: phalanx-launch. This folder's library is what both modes share
# and what needs no process: options, roles, restart decisions, straggler
# statistics, the agents' liveness watch, the workers' environment, output
# lines and the agents' result lines; agent/ runs a node's workers, driver/
# runs the job's steps.
noinst_LTLIBRARIES += launcher/libphxlaunch.la
launcher_libphxlaunch_la_SOURCES = launcher/launch.h \
	launcher/options.c launcher/options_driver.c launcher/options.h \
	launcher/role.c launcher/role.h launcher/restart.c launcher/restart.h \
	launcher/straggler.c launcher/straggler.h launcher/env.c launcher/env.h \
	launcher/output.c launcher/output.h launcher/result.c launcher/result.h \
	launcher/xrdv.c launcher/xrdv.h \
	launcher/liveness.c launcher/liveness.h launcher/standin.c launcher/standin.h

bin_PROGRAMS += launcher/phalanx-launch
launcher_phalanx_launch_SOURCES = launcher/launch.c
launcher_phalanx_launch_LDADD = launcher/agent/libphxagent.la launcher/driver/libphxdriver.la \
	launcher/libphxlaunch.la checkpoint/node/libphxnode.la checkpoint/proto/libphxproto.la \
	health/libphxhealth.la placement/libphxplacement.la common/libphxcommon.la \
	$(SLURM_LIBS) $(PMIX_LIBS)
