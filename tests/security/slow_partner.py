#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Strangers at a node's partner server: what any process on a cluster
node can open there without the job's secret.

    slow_partner.py HOST:PORT SECONDS CONNECTIONS

For SECONDS it keeps CONNECTIONS connections open to the partner server,
each sending one byte of a header now and then (never a whole one), and
opens a new one at once for every one the server closes. Then prints one
line:
  opened N closed C held H
(C: connections the server closed; H: connections open at the end).
"""
import selectors
import socket
import sys
import time


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    seconds, want = float(sys.argv[2]), int(sys.argv[3])
    sel = selectors.DefaultSelector()
    opened = closed = 0
    end = time.monotonic() + seconds
    next_byte = time.monotonic()

    def open_one():
        nonlocal opened
        s = socket.create_connection((host, int(port)), timeout=5)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        opened += 1

    while time.monotonic() < end:
        while len(sel.get_map()) < want:
            try:
                open_one()
            except OSError:
                time.sleep(0.05)
                break
        # The server never writes to a sender: anything readable is its close.
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            try:
                gone = s.recv(1) == b""
            except OSError:
                gone = True
            if gone:
                sel.unregister(s)
                s.close()
                closed += 1
        if time.monotonic() >= next_byte:
            next_byte = time.monotonic() + 1
            for key in list(sel.get_map().values()):
                try:
                    key.fileobj.send(b"\0")
                except OSError:
                    pass
    print(f"opened {opened} closed {closed} held {len(sel.get_map())}", flush=True)


if __name__ == "__main__":
    main()
