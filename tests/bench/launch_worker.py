#!/usr/bin/python3
"""A worker for tests/bench/launch.

  launch_worker.py start DIR    write the time it started to DIR/start-RANK
  launch_worker.py watch DIR    the same, then beat through libphalanx every
                                0.05 s; on SIGTERM write DIR/term-RANK, exit

Times are CLOCK_REALTIME in nanoseconds: every lab node is this machine.
"""
import ctypes
import os
import signal
import sys
import time


def stamp(path):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{time.time_ns()}\n")
    os.rename(tmp, path)


def main():
    mode, out = sys.argv[1], sys.argv[2]
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "x"))
    stamp(f"{out}/start-{rank}-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}")
    if mode == "start":
        return 0
    signal.signal(signal.SIGTERM, lambda *_: (stamp(f"{out}/term-{rank}"), os._exit(0)))
    with open(f"{out}/pid-{rank}", "w") as f:
        f.write(f"{os.getpid()} {os.environ.get('PHALANX_NODE', '?')}\n")
    beat = ctypes.CDLL(os.environ["PHX_LIBPHALANX"]).phx_heartbeat
    beat.argtypes = [ctypes.c_long]
    step = 0
    while True:
        step += 1
        beat(step)
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
