# The batch script's driver: steps, bad nodes, spares, requeues.
noinst_LTLIBRARIES += launcher/driver/libphxdriver.la
launcher_driver_libphxdriver_la_SOURCES = launcher/driver/driver.h \
	launcher/driver/driver.c launcher/driver/driver_int.h launcher/driver/driver_nodes.c \
	launcher/driver/driver_srun.c launcher/driver/driver_requeue.c launcher/driver/driver_steps.c \
	launcher/driver/driver_plan.c launcher/driver/driver_plan.h \
	launcher/driver/driver_trust.c launcher/driver/driver_preflight.c \
	launcher/driver/driver_preflight.h \
	launcher/driver/driver_ckptd.c launcher/driver/driver_ckptd.h \
	launcher/driver/driver_lost.c launcher/driver/driver_lost.h \
	launcher/driver/driver_roles.c launcher/driver/driver_roles.h \
	launcher/driver/driver_ledger.c launcher/driver/driver_ledger.h \
	launcher/driver/driver_xrdv.c launcher/driver/driver_xrdv.h
