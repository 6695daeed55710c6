#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A PyTorch job whose rank FAIL raises under torch's @record once the
gloo process group has formed; the other ranks then fail in their next
collective because a peer is gone, as in any real job.

usage: record_failure.py FAIL
"""
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    if dist.get_rank() == int(sys.argv[1]):
        raise ValueError("injected failure on rank %d" % dist.get_rank())
    dist.all_reduce(t)
    dist.barrier()


if __name__ == "__main__":
    main()
