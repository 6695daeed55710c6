#!/usr/bin/python3
"""A worker for tests/bench/launch's fault timings.

  launch_worker.py watch DIR    write DIR/pid-RANK, beat through libphalanx
                                every 0.05 s; on SIGTERM write the time to
                                DIR/term-RANK and exit

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
    if sys.argv[1:2] != ["watch"] or len(sys.argv) != 3:
        sys.exit("usage: launch_worker.py watch DIR")
    out = sys.argv[2]
    rank = os.environ["RANK"]
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
