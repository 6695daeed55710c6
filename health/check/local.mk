# phalanx-check: the node side of 'phalanx check' (GPU tests, NCCL pairs);
# built only when configure finds CUDA (runtime, cuBLAS) and NCCL. The only
# program built with CUDA's flags.
if HAVE_CHECK_GPU
bin_PROGRAMS += health/check/phalanx-check
endif
health_check_phalanx_check_SOURCES = health/check/check.c health/check/check.h \
	health/check/check_gpu.c health/check/check_nccl.c
health_check_phalanx_check_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
health_check_phalanx_check_LDADD = health/libphxhealth.la common/libphxcommon.la \
	$(SLURM_LIBS) $(PMIX_LIBS) $(CUDA_LDFLAGS) $(CUDA_LIBS)

# 'phalanx check' and phalanx-launch --preflight run the phalanx-check that
# lies beside them, as it does once installed in one bindir; in a build tree
# a link beside each of them points at this one.
if HAVE_CHECK_GPU
all-local: health/check/phalanx-check$(EXEEXT) cli/phalanx$(EXEEXT) \
		launcher/phalanx-launch$(EXEEXT)
	ln -sf ../health/check/phalanx-check$(EXEEXT) cli/phalanx-check$(EXEEXT)
	ln -sf ../health/check/phalanx-check$(EXEEXT) launcher/phalanx-check$(EXEEXT)
CLEANFILES += cli/phalanx-check$(EXEEXT) launcher/phalanx-check$(EXEEXT)
endif
