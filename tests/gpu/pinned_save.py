#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""phalanx.pytorch's device copies into pinned staging buffers, on a real GPU.

phalanx.pytorch pins the agent's buffers through phx_set_pinning(3) with
CUDA's cudaHostRegister. Without an agent here, a stand-in Phalanx object
hands out one reused host buffer and calls the pin hook as libphalanx does
when it maps a buffer. Checks that the registration succeeds, that a
1 GiB state of CUDA tensors saved into the pinned buffer reads back bit for
bit, and prints the copy rate into the pinned buffer against the same copy
into pageable memory (the ratio is the point of pinning). Exits non-zero
when a check fails.
"""
import ctypes
import mmap
import sys
import time

import torch

import phalanx.pytorch as pp


class Stand_in:
    """What save() needs of phalanx.Phalanx: one buffer, mapped and pinned once."""

    def __init__(self, nbytes, pinned):
        # Page-aligned shared memory, as the agent's memfd mappings are.
        self.buf = mmap.mmap(-1, nbytes)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        self.nbytes, self.pinned, self.ok = nbytes, pinned, None

    def set_pinning(self, pin, unpin):
        self.unpin = unpin
        if self.pinned:
            self.ok = pin(self.addr, self.nbytes)

    def begin(self, step, nbytes, wait=False, timeout=None, sharded=False):
        return memoryview(self.buf).cast("B")[:nbytes]

    def commit(self):
        pass


def save_rate(state, nbytes, pinned):
    phx = Stand_in(nbytes + (1 << 20), pinned)
    pp._pinning = None
    pp.save(phx, 1, state)  # first: registration and first touch
    t = time.perf_counter()
    for step in range(2, 5):
        pp.save(phx, step, state)
    rate = 3 * nbytes / (time.perf_counter() - t) / 1e9
    back = pp.decode(bytes(phx.buf))
    same = all(torch.equal(back[k], v.cpu()) for k, v in state.items())
    if phx.ok:
        phx.unpin(phx.addr)
    return rate, same, phx.ok


def main():
    if not torch.cuda.is_available():
        print("(PyTorch with CUDA is not installed here: the pinned save check needs it)")
        return 0
    torch.cuda.set_device(0)
    state = {f"w{i}": torch.randn(1 << 23, device="cuda") for i in range(32)}  # 1 GiB
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    pinned, same_p, ok = save_rate(state, nbytes, True)
    pageable, same_u, _ = save_rate(state, nbytes, False)
    print(f"save of {nbytes >> 20} MiB of CUDA tensors: into pinned staging {pinned:.1f} GB/s, "
          f"into pageable {pageable:.1f} GB/s, ratio {pinned / pageable:.2f}; "
          f"registered: {ok}, bit for bit: {same_p and same_u}")
    return 0 if ok and same_p and same_u else 1


if __name__ == "__main__":
    sys.exit(main())
