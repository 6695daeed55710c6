# checkpoint/ckptd/: phalanx-ckptd, the cluster's checkpoint coordinator (one
# epoll loop): connections, catalog and two-phase commit, journal, recovery
# policy and requeues, goodput ledger, metrics. The library is the daemon less
# its main, for the tests and the CLI's goodput report.
noinst_LTLIBRARIES += checkpoint/ckptd/libphxckptd.la
checkpoint_ckptd_libphxckptd_la_SOURCES = \
	checkpoint/ckptd/ckptd.h \
	checkpoint/ckptd/ckptd_clock.c checkpoint/ckptd/ckptd_clock.h \
	checkpoint/ckptd/ckptd_journal.c checkpoint/ckptd/ckptd_journal.h \
	checkpoint/ckptd/ckptd_slurm.c checkpoint/ckptd/ckptd_slurm.h \
	checkpoint/ckptd/ckptd_authz.c checkpoint/ckptd/ckptd_authz.h \
	checkpoint/ckptd/ckptd_munge.c checkpoint/ckptd/ckptd_munge.h \
	checkpoint/ckptd/ckptd_job.c checkpoint/ckptd/ckptd_job.h \
	checkpoint/ckptd/ckptd_conn.c checkpoint/ckptd/ckptd_conn.h \
	checkpoint/ckptd/ckptd_recovery.c checkpoint/ckptd/ckptd_recovery.h \
	checkpoint/ckptd/ckptd_catalog.c checkpoint/ckptd/ckptd_catalog.h \
	checkpoint/ckptd/ckptd_agent.c checkpoint/ckptd/ckptd_agent.h \
	checkpoint/ckptd/ckptd_admin.c checkpoint/ckptd/ckptd_admin.h \
	checkpoint/ckptd/ckptd_metrics.c checkpoint/ckptd/ckptd_metrics.h \
	checkpoint/ckptd/ckptd_notify.c checkpoint/ckptd/ckptd_notify.h \
	checkpoint/ckptd/ckpt_commit.c checkpoint/ckptd/ckpt_commit.h \
	checkpoint/ckptd/ckpt_interval.c checkpoint/ckptd/ckpt_interval.h \
	checkpoint/ckptd/recovery_policy.c checkpoint/ckptd/recovery_policy.h \
	checkpoint/ckptd/goodput.c checkpoint/ckptd/goodput.h
checkpoint_ckptd_libphxckptd_la_LIBADD = $(MHD_LIBS) $(MUNGE_LIBS) -lpthread

sbin_PROGRAMS += checkpoint/ckptd/phalanx-ckptd
checkpoint_ckptd_phalanx_ckptd_SOURCES = checkpoint/ckptd/ckptd.c
checkpoint_ckptd_phalanx_ckptd_LDADD = checkpoint/ckptd/libphxckptd.la \
	checkpoint/proto/libphxproto.la common/libphxcommon.la $(SLURM_LIBS)
