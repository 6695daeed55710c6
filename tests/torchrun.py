#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torchrun as the test suites and benchmarks run it on the lab: PyTorch's
own torch.distributed.run, with two fixes that Debian's builds need and
nothing else changed.

Debian's torchrun on Python 3.11: Std.from_str("0") is None, because
iterating an IntFlag no longer yields the zero member. Debian 13's PyTorch
2.6, built without libuv: its rendezvous creates a TCPStore asking for
libuv whatever USE_LIBUV says; with USE_LIBUV=0 the store is made without.

usage: tests/torchrun.py [torchrun's arguments]
"""
import os
import sys

import torch.distributed.elastic.multiprocessing.api as api

_from_str = api.Std.from_str.__func__


def _std_from_str(cls, vm):
    return api.Std(0) if vm.strip() == "0" else _from_str(cls, vm)


api.Std.from_str = classmethod(_std_from_str)

if os.environ.get("USE_LIBUV") == "0":
    import torch.distributed as dist

    class _Store(dist.TCPStore):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    dist.TCPStore = _Store

from torch.distributed.run import main  # noqa: E402

sys.argv[0] = "torchrun"
main()
