# checkpoint/proto/: what the daemon, the agents, the CLI and libphalanx
# agree on: the daemon's wire protocol and its client, manifests, digests,
# the trainer-agent messages, the heartbeat page and the role ledger record.
noinst_LTLIBRARIES += checkpoint/proto/libphxproto.la
checkpoint_proto_libphxproto_la_SOURCES = \
	checkpoint/proto/ckpt_wire.c checkpoint/proto/ckpt_wire.h checkpoint/proto/ckpt_wire_fast.c \
	checkpoint/proto/ckpt_wire_msg.c \
	checkpoint/proto/ckpt_json.c checkpoint/proto/ckpt_json.h \
	checkpoint/proto/ckpt_manifest.c checkpoint/proto/ckpt_manifest.h \
	checkpoint/proto/digest.c checkpoint/proto/digest.h \
	checkpoint/proto/digest_file.c checkpoint/proto/digest_file.h \
	checkpoint/proto/ckpt_client.c checkpoint/proto/ckpt_client.h \
	checkpoint/proto/role_ledger.c checkpoint/proto/role_ledger.h \
	checkpoint/proto/ckpt_msg.h checkpoint/proto/heartbeat.h
checkpoint_proto_libphxproto_la_LIBADD = $(JSONC_LIBS) $(CRYPTO_LIBS) $(XXHASH_LIBS)
