# placement/: node topology (hwloc), the fabric (topology.conf, YAML), the
# layout and its Megatron-Core mapping, the one placement function with its
# cost and bound, the rank map and the torchrun environment. Linked into the
# plugin, the launcher and the CLI.
noinst_LTLIBRARIES += placement/libphxplacement.la
placement_libphxplacement_la_SOURCES = \
	placement/topo.c placement/topo.h \
	placement/fabric.c placement/fabric.h placement/fabric_int.h \
	placement/fabric_tconf.c placement/fabric_yaml.c placement/fabric_load.c \
	placement/layout.c placement/layout.h \
	placement/megatron.c placement/megatron.h \
	placement/placement.c placement/placement.h placement/placement_int.h \
	placement/placement_pack.c placement/placement_refine.c placement/placement_cost.c \
	placement/placement_links.c placement/placement_link_bound.c placement/placement_ends.c \
	placement/placement_spread.c placement/placement_share.c \
	placement/placement_bound.c placement/plan_case.c placement/plan_case.h \
	placement/rankmap.c placement/rankmap.h \
	placement/torchenv.c placement/torchenv.h
placement_libphxplacement_la_LIBADD = $(HWLOC_LIBS) -lm
# The SimGrid simulation 'phalanx plan --explain' runs when python3-simgrid is installed.
pkglibexec_SCRIPTS = placement/phalanx-plan-sim
EXTRA_DIST += placement/phalanx-plan-sim
