#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""An attacker with no job token against phalanx-ckptd's agent port.

    preauth_flood.py HOST:PORT IDLE

Opens IDLE connections that never say hello, then one that announces a
32 MiB frame and streams it. Prints, one per line:
  big_sent BYTES      how much of the 32 MiB frame the daemon took
                      before it closed the connection
  idle_dropped N      idle connections the daemon closed at once (caps)
and, after waiting up to 10 s for the rest:
  idle_open_after N   idle connections still open (the auth deadline)
"""
import socket
import struct
import sys
import time

FRAME = 32 << 20


def closed(s):
    s.setblocking(False)
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    addr = (host, int(port))
    big = socket.create_connection(addr, timeout=10)
    idle = [socket.create_connection(addr, timeout=10) for _ in range(int(sys.argv[2]))]
    sent = 0
    chunk = b"{" * 65536
    try:
        big.sendall(struct.pack(">I", FRAME))
        while sent < FRAME:
            sent += big.send(chunk)
    except OSError:
        pass
    print(f"big_sent {sent}", flush=True)
    time.sleep(0.5)
    print(f"idle_dropped {sum(closed(s) for s in idle)}", flush=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(closed(s) for s in idle):
        time.sleep(0.2)
    print(f"idle_open_after {sum(not closed(s) for s in idle)}", flush=True)


if __name__ == "__main__":
    main()
