# cli/: the phalanx command, one file per subcommand.
bin_PROGRAMS += cli/phalanx
cli_phalanx_SOURCES = cli/phalanx.c cli/commands.h cli/cli_args.c cli/cli_args.h \
	cli/cmd_config.c cli/cmd_health.c cli/cmd_hostlist.c cli/cmd_topo.c cli/cmd_keygen.c \
	cli/cmd_plan.c cli/plan_sim.c cli/plan_sim.h cli/cmd_check.c cli/cmd_ckpt.c \
	cli/ckptd_request.c cli/ckptd_request.h \
	cli/cmd_goodput.c cli/progress.c cli/progress.h
cli_phalanx_LDADD = checkpoint/ckptd/libphxckptd.la checkpoint/proto/libphxproto.la \
	health/libphxhealth.la placement/libphxplacement.la common/libphxcommon.la $(SLURM_LIBS)
