# checkpoint/node/: the node's staging engine that the agent runs: tiers,
# persisting and restoring shards, generation plans, partner copies.
noinst_LTLIBRARIES += checkpoint/node/libphxnode.la
checkpoint_node_libphxnode_la_SOURCES = \
	checkpoint/node/ckpt.h checkpoint/node/ckpt_int.h \
	checkpoint/node/ckpt_plan.c checkpoint/node/ckpt_manifest.c \
	checkpoint/node/ckpt_buf.c checkpoint/node/ckpt_dir.c \
	checkpoint/node/ckpt_io.c checkpoint/node/ckpt_restore.c \
	checkpoint/node/partner_copy.c \
	checkpoint/node/partner.c checkpoint/node/partner.h \
	checkpoint/node/partner_io.c checkpoint/node/partner_io.h \
	checkpoint/node/partner_server.c checkpoint/node/partner_server.h
checkpoint_node_libphxnode_la_LIBADD = -lpthread
