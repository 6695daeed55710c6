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
	launcher/agent/agent_xid.c launcher/agent/agent_xid.h \
	launcher/agent/agent_wake.c launcher/agent/agent_wake.h \
	launcher/agent/agent_xrdv.c launcher/agent/agent_xrdv.h
