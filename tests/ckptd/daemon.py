# SPDX-License-Identifier: Apache-2.0
"""A phalanx-ckptd of the build tree in a scratch folder, for the tests that
need a real daemon but no cluster (its sockets on loopback and in the folder)."""
import os
import socket
import subprocess
import tempfile
import time

CKPTD = os.environ.get("PHX_CKPTD", "./checkpoint/ckptd/phalanx-ckptd")
PHALANX = os.environ.get("PHX_CLI", "./cli/phalanx")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="phalanx-ckptd-test.")
        self.key = os.path.join(self.dir, "key")
        self.admin = os.path.join(self.dir, "ckptd.sock")
        self.metrics = f"127.0.0.1:{free_port()}"
        self.tcp = f"127.0.0.1:{free_port()}"
        self.log = os.path.join(self.dir, "log")
        self.proc = None
        subprocess.run([PHALANX, "keygen", self.key], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.dir, "phalanx.yaml"), "w") as f:
            f.write(f"key_file: {self.key}\n")

    def start(self, env=None, wait=True):
        """Starts it; with wait, returns once its admin socket is there (10 s at most)."""
        if os.path.exists(self.admin):
            os.unlink(self.admin)
        self.proc = subprocess.Popen(
            [CKPTD, "-c", os.path.join(self.dir, "phalanx.yaml"),
             "--listen", self.tcp, "--socket", self.admin,
             "--state-dir", os.path.join(self.dir, "state"), "--key", self.key,
             "--metrics", self.metrics],
            env=dict(os.environ, **(env or {})), stdout=open(self.log, "a"),
            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while wait and not os.path.exists(self.admin) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.proc

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def output(self):
        with open(self.log) as f:
            return f.read()

    def remove(self):
        self.stop()
        subprocess.run(["rm", "-rf", self.dir])


class Report:
    """ok:/FAIL: lines; failed is true once a check has failed."""

    def __init__(self):
        self.failed = False

    def check(self, name, ok, detail=""):
        print(("ok: " if ok else "FAIL: ") + name + ("" if ok else ": " + str(detail)))
        self.failed |= not ok
        return ok
