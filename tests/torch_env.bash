# SPDX-License-Identifier: Apache-2.0
#
# Sourced by the suites, the demo and the benchmarks that run PyTorch jobs.
#
# phx_torch_env: exports USE_LIBUV=0 when the installed PyTorch asks for a
# libuv TCPStore it was built without. Debian 13's PyTorch 2.6 is such a
# build: since 2.4 init_process_group("env://") and torchrun ask for libuv
# unless USE_LIBUV=0, and there they fail with "use_libuv was requested but
# PyTorch was build without libuv support". A site that runs it sets the
# same (README, phalanx(7)). PyTorch 1.13 has no libuv store: nothing to do.
# A USE_LIBUV already set is left as it is.
phx_torch_env()
{
	[ -z "${USE_LIBUV+x}" ] || return 0
	/usr/bin/python3 - 2>/dev/null <<'PY' && return 0
import sys
import torch.distributed as dist
try:
    dist.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True, wait_for_workers=False)
except TypeError:
    sys.exit(0)  # no use_libuv argument: a store without libuv
except RuntimeError as e:
    sys.exit(1 if "libuv" in str(e) else 0)
PY
	export USE_LIBUV=0
}
