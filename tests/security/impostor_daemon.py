#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A process at phalanx-ckptd's address without the cluster key: what a
cluster user can start there while the daemon is down or moved.

    impostor_daemon.py HOST:PORT SECONDS

For SECONDS it answers every agent as a daemon that wants to be trusted
would: a challenge, then, whatever the answer, a welcome (with no proof,
as it cannot make one) and at once a commit of generation 1, so an agent
that believed it would collect its older generations. Then prints one
line:
  connections N auths A nonces K registers R prepares P
(K: auths that asked the daemon for its proof).
"""
import json
import os
import selectors
import socket
import struct
import sys
import time


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


class Peer:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def messages(self):
        while len(self.buf) >= 4:
            (n,) = struct.unpack(">I", self.buf[:4])
            if len(self.buf) < 4 + n:
                return
            body, self.buf = self.buf[4 : 4 + n], self.buf[4 + n :]
            yield json.loads(body)


def answer(peer, msg, counts):
    kind = msg.get("type")
    if kind == "hello":
        peer.sock.sendall(frame({"v": 2, "type": "challenge", "nonce": os.urandom(32).hex()}))
    elif kind == "auth":
        counts["auths"] += 1
        counts["nonces"] += "nonce" in msg
        peer.sock.sendall(
            frame({"v": 2, "type": "welcome", "committed": 0, "step": 0})
            + frame({"v": 2, "type": "commit", "gen": 1, "step": 100, "keep_from": 1})
        )
    elif kind == "register":
        counts["registers"] += 1
        peer.sock.sendall(
            frame({"v": 2, "type": "registered", "committed": 1, "step": 100, "keep": 1})
        )
    elif kind == "prepare":
        counts["prepares"] += 1


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    end = time.monotonic() + float(sys.argv[2])
    counts = dict(connections=0, auths=0, nonces=0, registers=0, prepares=0)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, int(port)))
    lsock.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ)
    print("listening", flush=True)
    while (left := end - time.monotonic()) > 0:
        for key, _ in sel.select(timeout=min(left, 0.2)):
            if key.fileobj is lsock:
                conn, _ = lsock.accept()
                counts["connections"] += 1
                sel.register(conn, selectors.EVENT_READ, Peer(conn))
                continue
            peer = key.data
            try:
                data = peer.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                sel.unregister(peer.sock)
                peer.sock.close()
                continue
            peer.buf += data
            try:
                for msg in peer.messages():
                    answer(peer, msg, counts)
            except OSError:
                pass
    print(" ".join(f"{k} {v}" for k, v in counts.items()), flush=True)


if __name__ == "__main__":
    main()
