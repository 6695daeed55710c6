#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A cluster user with a job token (their own job's, or one of a job that
ended) against phalanx-ckptd's agent port, speaking the agents' protocol.

    token_holder.py HOST:PORT JOB UID TOKEN ROLE NODE [EVENT ...]

ROLE is agent or driver, NODE the node name the hello claims, each EVENT a
JSON object sent as an "event" message once authenticated (an agent first
registers as one node of one rank; agent:NODES:RANKS registers that shape).
PHX_HOLD_S (seconds, default 0.5) is how long the connection is held open
after the events before the check. Prints one line:
  refused REASON      the daemon refused the hello or the answer
  open                authenticated, events sent, still connected 0.5 s later
  closed REASON       authenticated, then the daemon ended the connection
"""
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time


def send(s, obj):
    data = json.dumps(obj).encode()
    s.sendall(struct.pack(">I", len(data)) + data)


def recv(s):
    head = b""
    while len(head) < 4:
        part = s.recv(4 - len(head))
        if not part:
            return None
        head += part
    (n,) = struct.unpack(">I", head)
    body = b""
    while len(body) < n:
        part = s.recv(n - len(body))
        if not part:
            return None
        body += part
    return json.loads(body)


def reason(msg):
    if msg is None:
        return "connection closed"
    return msg.get("reason", json.dumps(msg))


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    job, uid, token, node = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[6]
    role, *shape = sys.argv[5].split(":")
    nodes, ranks = (int(shape[0]), int(shape[1])) if shape else (1, 1)
    events = [json.loads(e) for e in sys.argv[7:]]
    s = socket.create_connection((host, int(port)), timeout=10)
    send(s, {"v": 3, "type": "hello", "role": role, "job": job, "uid": uid, "node": node})
    msg = recv(s)
    if not msg or msg.get("type") != "challenge":
        print("refused", reason(msg))
        return
    text = "phalanx-ckptd-auth:v1:%s:%u:%u:%s" % (msg["nonce"], job, uid, node)
    mac = hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()
    send(s, {"v": 3, "type": "auth", "mac": mac})
    msg = recv(s)
    if not msg or msg.get("type") != "welcome":
        print("refused", reason(msg))
        return
    if role == "agent":
        send(s, {"v": 3, "type": "register", "nodes": nodes, "ranks": ranks, "layout": ""})
        msg = recv(s)
        if not msg or msg.get("type") != "registered":
            print("closed", reason(msg))
            return
    for e in events:
        send(s, dict({"v": 3, "type": "event"}, **e))
    time.sleep(float(os.environ.get("PHX_HOLD_S", "0.5")))
    s.setblocking(False)
    try:
        data = s.recv(65536)
        print("closed", data[4:].decode(errors="replace") if data else "connection closed")
    except BlockingIOError:
        print("open")


if __name__ == "__main__":
    main()
