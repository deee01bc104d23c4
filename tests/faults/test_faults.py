"""The fault suite (docs/security.md): memproxy under conditions an operator meets in production —
out of file descriptors, out of disk, killed with -9 under load. Each test starts its own
memproxy and mock upstream on loopback and stops them. Assertions are about what a user
would check (bounded CPU and log, a polite refusal, every acknowledged turn there after a
restart), never about how fast a loaded machine is."""
import http.client
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import (Memproxy, Mock, USER_HI, cpu_seconds, scratch_dir,  # noqa: E402
                     wait_for)


def fd_limit(n):
    """preexec for memproxy: n open files, soft and hard (it cannot raise them)."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def own_fds(n):
    """Let this test process open n sockets; False when its hard limit forbids it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return True
    if hard != resource.RLIM_INFINITY and hard < n:
        return False
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return True


def idle_connections(port, n):
    out = []
    for _ in range(n):
        s = socket.socket()
        s.connect(("127.0.0.1", port))  # the kernel completes it from the backlog
        s.setblocking(False)
        out.append(s)
    return out


def chat_ok(mp):
    try:
        status, _, _ = mp.request("POST", "/v1/chat/completions", USER_HI, timeout=30)
        return status == 200
    except OSError:
        return False


class Descriptors(unittest.TestCase):
    def start(self, config):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(config, upstream=self.mock.url, preexec=fd_limit(256))
        self.addCleanup(self.mp.stop)

    def close_all(self, socks):
        for s in socks:
            s.close()

    def test_past_max_connections_a_client_gets_503_and_is_closed(self):
        self.start("server:\n  max_connections: 20\n")
        socks = idle_connections(self.mp.port, 60)
        self.addCleanup(self.close_all, socks)
        refused = {}

        def read_refusals():
            r, _, _ = select.select([s for s in socks if s not in refused], [], [], 0.05)
            for s in r:
                try:
                    refused[s] = s.recv(65536)
                except BlockingIOError:
                    pass
            return len(refused) >= 40

        wait_for(read_refusals, timeout=60, what="40 connections refused")
        time.sleep(0.3)
        read_refusals()
        self.assertEqual(len(refused), 40, "20 of 60 stay open, the rest are refused")
        for answer in refused.values():
            head, _, body = answer.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 503"), answer[:200])
            self.assertIn(b"Retry-After: 1", head)
            self.assertEqual(json.loads(body)["error"]["code"], "too_many_connections")
        self.close_all(socks)
        tries = []

        def served():
            tries.append(1)
            return chat_ok(self.mp)

        wait_for(served, timeout=60, what="a request served again")
        # the refusals are counted as answers: the 40, and any try that came before the
        # closes were seen (a scrape takes a connection of its own)
        _, _, out = self.mp.request("GET", "/metrics")
        m = re.search(r'memproxy_requests_total\{route="other",status="503"\} (\d+)', out.decode())
        self.assertIsNotNone(m, "refusals are not counted")
        self.assertTrue(40 <= int(m.group(1)) <= 40 + len(tries) - 1, (m.group(1), len(tries)))

    def test_out_of_descriptors_memproxy_waits_instead_of_spinning(self):
        if not own_fds(1024):
            self.skipTest("this process may not open 700 sockets (ulimit -Hn)")
        self.start("server:\n  max_connections: 100000\n")  # past what 256 fds allow
        socks = idle_connections(self.mp.port, 600)
        self.addCleanup(self.close_all, socks)
        wait_for(lambda: "not accepting for a while" in self.mp.output(), timeout=60,
                 what="accept() to run out of descriptors")
        cpu0, log0 = cpu_seconds(self.mp.proc.pid), os.path.getsize(self.mp.log_path)
        time.sleep(3)
        cpu = cpu_seconds(self.mp.proc.pid) - cpu0
        grown = os.path.getsize(self.mp.log_path) - log0
        # spinning on accept() took 1.6 cores and 7 MB of log a second
        self.assertLess(cpu, 0.5, "memproxy used %.2f s of CPU in 3 s doing nothing" % cpu)
        self.assertLess(grown, 4096, "memproxy logged %d bytes in 3 s" % grown)
        self.close_all(socks)
        wait_for(lambda: chat_ok(self.mp), timeout=60, what="a request served again")
        wait_for(lambda: "accepting again" in self.mp.output(), timeout=30,
                 what="the line that ends the episode")


class DiskFull(unittest.TestCase):
    """The database on a small tmpfs filled up: commits fail, memproxy says so (503
    storage_failed, never 404 for a session that exists) and changes nothing; space back,
    it works again with everything acknowledged before still there."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("mounting a tmpfs needs root")
        self.dir = scratch_dir("tmpfs-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", self.dir],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs here: " + r.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", self.dir])
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy("auth:\n  admin_keys: [admin-key-0123456789]\n",
                           upstream=self.mock.url, db=os.path.join(self.dir, "memproxy.db"))
        self.addCleanup(self.mp.stop)

    def api(self, method, path, body=None):
        return self.mp.json(method, path, body,
                            {"Authorization": "Bearer admin-key-0123456789"})

    def fill(self):
        """Fill the tmpfs; returns the filler's path."""
        path = os.path.join(self.dir, "filler")
        with open(path, "wb", buffering=0) as f:  # unbuffered: closing it flushes nothing
            try:
                while f.write(b"\0" * 65536):
                    pass
            except OSError:
                pass
        return path

    def chat(self, sid, text):
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body,
                                         {"X-Session-Id": sid})
        return status, out

    def test_full_disk_is_503_storage_failed_everywhere_and_nothing_is_lost(self):
        for i in range(3):
            self.assertEqual(self.chat("kept-%d" % i, "hello %d" % i)[0], 200)
        filler = self.fill()
        big = "x" * 200000  # no room for its turn: the commit fails
        status, out = self.chat("kept-0", big)
        self.assertEqual(status, 503, out[:300])
        self.assertEqual(json.loads(out)["error"]["code"], "storage_failed")
        # a change that needs room fails too, and says so: retry, not "no such session"
        small = "y" * 2000  # any commit needs a new WAL frame: none fits
        for method, path, body in (("PATCH", "/v1/sessions/kept-1", {"metadata": {"k": small}}),
                                   ("POST", "/v1/sessions/kept-1/update",
                                    {"properties": {"llm": {"system_messages": [small]}}}),
                                   ("POST", "/v1/sessions/kept-1/stop", None),
                                   ("DELETE", "/v1/sessions/kept-2", None)):
            status, out = self.api(method, path, body)
            self.assertEqual((status, out["error"]["code"]), (503, "storage_failed"), out)
        os.unlink(filler)
        self.assertEqual(self.api("POST", "/v1/sessions/kept-1/stop")[0], 200)
        self.assertEqual(self.api("DELETE", "/v1/sessions/kept-2")[0], 200)
        status, h = self.api("GET", "/v1/sessions/kept-0/history")
        self.assertEqual([c["content"] for c in h["contents"] if c["role"] == "user"],
                         ["hello 0"])
        self.assertEqual(self.api("GET", "/v1/sessions/kept-1")[1]["status"], "STOPPED")


class KillUnderLoad(unittest.TestCase):
    """kill -9 while clients stream: every turn whose reply reached its end ([DONE]) is in the
    database after a restart."""
    CLIENTS = 4

    def test_every_acknowledged_turn_survives_kill_9(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        db = os.path.join(scratch_dir("kill-"), "memproxy.db")
        mp = Memproxy("", upstream=mock.url, db=db)
        acked, stop = [], threading.Event()

        def client(n):
            i = 0
            while not stop.is_set():
                sid, text = "kill-%d-%d" % (n, i), "turn %d of client %d" % (i, n)
                body = {"model": "m", "stream": True,
                        "messages": [{"role": "user", "content": text}]}
                try:
                    status, _, out = mp.request("POST", "/v1/chat/completions", body,
                                                {"X-Session-Id": sid}, timeout=30)
                except (OSError, http.client.HTTPException):
                    return  # killed under this request: it was never acknowledged
                if status == 200 and out.rstrip().endswith(b"data: [DONE]"):
                    acked.append((sid, text))
                i += 1

        threads = [threading.Thread(target=client, args=(n,)) for n in range(self.CLIENTS)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= 200, timeout=120, what="200 acknowledged turns")
        mp.proc.send_signal(signal.SIGKILL)
        mp.proc.wait(30)
        stop.set()
        for t in threads:
            t.join(60)
        mp.log.close()
        self.assertGreaterEqual(len(acked), 200)
        again = Memproxy("", upstream=mock.url, db=db)  # recovers the WAL
        self.addCleanup(again.stop)
        con = sqlite3.connect(db)
        stored = set(con.execute("SELECT s.id, m.content FROM messages m JOIN sessions s "
                                 "ON s.sid = m.sid WHERE m.role = 'user'"))
        con.close()
        lost = [a for a in acked if a not in stored]
        self.assertEqual(lost, [], "%d of %d acknowledged turns lost" % (len(lost), len(acked)))


if __name__ == "__main__":
    unittest.main()
