"""A randomized sweep over the whole front door, seeded so that a failure replays: the voice
platforms' bodies (tests/fixtures) mutated value by value, sent streaming and not, under
several session ids, keys and profiles, between REST calls (history, stop, update, export and
import, user memory and erasure, deliveries and their retry) while stops post dumps to a
receiver that sometimes fails. One memproxy runs with most features on: memory, summaries,
the cache, retrieval, idle stops, webhooks.

What a user would check, for every answer: it is not a 5xx (the mock upstream never fails
here, so every 5xx would be memproxy's own), the connection was answered, and a chat request
that was refused (4xx) left the stored turns of the session it named as they were. At the end
memproxy is still running and exits cleanly on SIGTERM, which under the sanitizers (the ASan
run of scripts/test: UBSan halts on error) also means no report."""
import copy
import json
import os
import random
import socket
import threading
import unittest
import urllib.parse

from harness import Memproxy, Mock

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
CLIENT = "client-key-0123456789abcdef"  # tenant t1, the admin key's
OTHER = "client-key-fedcba9876543210"   # tenant t2, users u*
ADMIN = {"Authorization": "Bearer admin-key-0123456789abcdef"}

CONFIG = """
auth:
  client_keys:
    - {key: %s, tenant: t1}
    - {key: %s, tenant: t2, user: "u*"}
  admin_keys:
    - {key: admin-key-0123456789abcdef, tenant: t1}
sessions:
  id_fields: [channel]
  user_fields: [/metadata/caller]
  idle_timeout: 2s
webhooks:
  - url: http://127.0.0.1:%%d/hook
    secret: webhook-secret-0123456789abcdef
    events: [103, 102]
    max_attempts: 2
    backoff: 1s
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - name: default
    upstream: mock
    token_budget: 200
    summarize: true
    summary_wait: 1s
    summary_threshold: 3
    cache: true
    retrieval: true
  - name: stored
    upstream: mock
    history: stored
    interruptions: annotate
    transforms: [interruptions, drop_sources, timestamps, trim, inject_memory]
    drop_sources: [silence]
    token_budget: 50
  - name: orig
    upstream: mock
    interruptions: original
""" % (CLIENT, OTHER)

SESSIONS = ["s1", "s2", "s3", "u1", "", "\u00e9t\u00e9", "x" * 300, "a/b", "s 1"]
STRINGS = ["", "x", "\u00e9\u4e2d\U0001F600", "a" * 5000, "\\", "\"", "null", "0", "-1",
           "1e309", "<script>", "../../etc", "%00", " "]
VALUES = [None, True, False, 0, -1, 2**63, -2**63, 1.5, 1e300, "", [], {}, [1], {"a": 1},
          "user", "assistant", "system", "tool"]
KEYS = ["role", "content", "turn_id", "interrupted", "source", "original", "metadata",
        "tool_calls", "name", "stream", "session_id", "channel", "user", "profile",
        "max_tokens", "n", "tools", "stream_options", "timestamp", "interrupt_timestamp"]


def _fixtures():
    out = []
    for name in sorted(os.listdir(FIXTURES)):
        if name.endswith(".json") and "notification" not in name and "update" not in name:
            with open(os.path.join(FIXTURES, name)) as f:
                out.append(json.load(f))
    out.append({"model": "m", "messages": [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "r"},
        {"role": "user", "content": "c"}]})
    return out


class Receiver(threading.Thread):
    """A webhook receiver on loopback that answers 500 to about one post in three."""

    def __init__(self, rnd):
        super().__init__(daemon=True)
        self.rnd = rnd
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                self._answer(c)

    def _answer(self, c):
        try:
            c.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                d = c.recv(65536)
                if not d:
                    return
                data += d
            head, _, body = data.partition(b"\r\n\r\n")
            n = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            need = int(n[0].split(b":")[1]) if n else 0
            while len(body) < need:
                d = c.recv(65536)
                if not d:
                    return
                body += d
            status = b"500 No" if self.rnd.random() < 0.3 else b"200 OK"
            c.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n"
                      b"Connection: close\r\n\r\n")
        except OSError:
            pass

    def stop(self):
        self.sock.close()


class SweepCase:
    """The sweep, for a TestCase: REPLICAS memproxy processes on one database (more than one
    on PostgreSQL only, test_replicas.py), each request sent to one of them at random."""
    REQUESTS = 1500
    REPLICAS = 1

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.receiver = Receiver(random.Random(7))
        self.receiver.start()
        self.addCleanup(self.receiver.stop)
        self.replicas = []
        for _ in range(self.REPLICAS):
            db = self.replicas[0].db_path if self.replicas else None
            mp = Memproxy(CONFIG % self.receiver.port, upstream=self.mock.url, db=db)
            self.addCleanup(mp.terminate)
            self.replicas.append(mp)
        self.mp = self.replicas[0]
        self.bodies = _fixtures()
        with open(os.path.join(FIXTURES, "agora-update-request.json")) as f:
            self.update = json.load(f)
        self.snapshots, self.notices, self.failures = [], [], []

    # ---- mutation ----

    def value(self):
        r = self.rnd.random()
        if r < 0.4:
            return self.rnd.choice(STRINGS)
        if r < 0.8:
            return copy.deepcopy(self.rnd.choice(VALUES))
        return self.rnd.randint(-5, 10**6)

    def mutate(self, v):
        if isinstance(v, dict):
            v = dict(v)
            for k in list(v):
                r = self.rnd.random()
                if r < 0.05:
                    del v[k]
                elif r < 0.10:
                    v[k] = self.value()
                elif r < 0.6:
                    v[k] = self.mutate(v[k])
            if self.rnd.random() < 0.05:
                v[self.rnd.choice(KEYS)] = self.value()
            return v
        if isinstance(v, list):
            v = [self.mutate(x) if self.rnd.random() < 0.5 else x for x in v]
            r = self.rnd.random()
            if r < 0.05 and v:
                del v[self.rnd.randrange(len(v))]
            elif r < 0.10 and v:
                v.insert(self.rnd.randrange(len(v) + 1), copy.deepcopy(self.rnd.choice(v)))
            elif r < 0.12:
                self.rnd.shuffle(v)
            return v
        return self.value() if self.rnd.random() < 0.15 else v

    # ---- requests ----

    def send(self, method, path, raw, headers, what):
        try:
            status, _, out = self.rnd.choice(self.replicas).request(method, path, raw=raw,
                                                                    headers=headers, timeout=60)
        except OSError as e:
            self.failures.append("%s %s: no answer (%r)" % (method, what, e))
            return None, None
        if status >= 500:
            self.failures.append("%s %s: %d %s" % (method, what, status, out[:200]))
        return status, out

    def turns(self, sid):
        status, _, out = self.rnd.choice(self.replicas).request(
            "GET", "/v1/sessions/%s/history?format=full" % sid, headers=ADMIN)
        return json.loads(out)["contents"] if status == 200 else status

    def chat(self):
        body = copy.deepcopy(self.rnd.choice(self.bodies))
        if self.rnd.random() < 0.6:
            body = self.mutate(body)
        if isinstance(body, dict) and self.rnd.random() < 0.7:
            body["stream"] = self.rnd.random() < 0.6
        sid = urllib.parse.quote(self.rnd.choice(SESSIONS), safe="")
        query = self.rnd.choice(["", "?session_id=" + sid, "?session_id=s1&user_id=u1",
                                 "?channel=s2"])
        path = self.rnd.choice(["/v1/chat/completions", "/p/stored/v1/chat/completions",
                                "/p/orig/v1/chat/completions",
                                "/p/nope/v1/chat/completions"]) + query
        key = self.rnd.choice([CLIENT] * 6 + [OTHER, "wrong", None])
        headers = {"Authorization": "Bearer " + key} if key else {}
        if self.rnd.random() < 0.1:
            headers["X-Memproxy-Profile"] = self.rnd.choice(["stored", "orig", "zz"])
        raw = json.dumps(body)
        if self.rnd.random() < 0.03:
            raw = raw[:self.rnd.randrange(len(raw) + 1)]
        named = sid if key == CLIENT and query.startswith("?session_id=" + sid) else None
        before = self.turns(named) if named else None
        status, out = self.send("POST", path, raw.encode(), headers, "chat " + path)
        if named and status is not None and 400 <= status < 500:
            after = self.turns(named)
            if after != before:
                self.failures.append("chat %s refused with %d changed the stored turns"
                                     % (path, status))

    def snapshot(self):
        if not self.snapshots:
            return {"format": "memproxy.session.v1", "session": {}, "turns": []}
        snap = copy.deepcopy(self.rnd.choice(self.snapshots))
        snap["session"]["id"] = "imp%d" % self.rnd.randrange(20)
        return self.mutate(snap) if self.rnd.random() < 0.5 else snap

    def rest(self):
        sid = urllib.parse.quote(self.rnd.choice(SESSIONS[:4] + ["imp1"]), safe="")
        notice = urllib.parse.quote(self.rnd.choice(self.notices + ["x"]), safe="")
        memory = {"summary": "likes tea",
                  "facts": [{"category": "c", "key": "k", "value": "v", "confidence": 0.7}]}
        calls = [
            ("GET", "/v1/sessions?limit=%s" % self.rnd.choice([1, 10, 0, -1, "x"]), None),
            ("GET", "/v1/sessions/" + sid, None),
            ("GET", "/v1/sessions/%s/history?limit=%s&format=%s" % (
                sid, self.rnd.choice([1, 5, 0, -5, "a"]),
                self.rnd.choice(["standard", "full", "text", "x"])), None),
            ("POST", "/v1/sessions/%s/stop" % sid, {}),
            ("PATCH", "/v1/sessions/" + sid,
             self.mutate({"labels": {"a": "b"}, "metadata": {"k": 1}})),
            ("DELETE", "/v1/sessions/" + sid, None),
            ("POST", "/v1/sessions/%s/update" % sid, self.mutate(self.update)),
            ("GET", "/v1/sessions/%s/export" % sid, None),
            ("POST", "/v1/sessions/import", self.snapshot()),
            ("GET", "/v1/users/u1/memory", None),
            ("PUT", "/v1/users/u1/memory", self.mutate(memory)),
            ("DELETE", "/v1/users/u1", None),
            ("GET", "/v1/webhooks/deliveries", None),
            ("GET", "/v1/webhooks/deliveries/" + notice, None),
            ("POST", "/v1/webhooks/deliveries/%s/retry" % notice, None),
            ("GET", "/metrics", None),
            ("GET", "/healthz", None),
        ]
        method, path, body = self.rnd.choice(calls)
        raw = json.dumps(body).encode() if body is not None else None
        headers = ADMIN if self.rnd.random() < 0.9 else {}
        status, out = self.send(method, path, raw, headers, path)
        if status != 200:
            return
        if path.endswith("/export"):
            self.snapshots.append(json.loads(out))
        elif path == "/v1/webhooks/deliveries":
            self.notices += [d["id"] for d in json.loads(out)["deliveries"]]

    def sweep(self, seed):
        self.rnd = random.Random(seed)
        for _ in range(self.REQUESTS):
            self.chat() if self.rnd.random() < 0.75 else self.rest()
            for mp in self.replicas:
                self.assertIsNone(mp.proc.poll(), "memproxy exited:\n" + mp.output())
        for sid in SESSIONS[:4]:  # every replica serves the same history
            seen = {mp.request("GET", "/v1/sessions/%s/history?format=full" % sid,
                               headers=ADMIN)[2] for mp in self.replicas}
            if len(seen) > 1:
                self.failures.append("the replicas' histories of %s differ" % sid)
        for mp in self.replicas:
            mp.stop()  # exits 0, or raises with its log
        self.assertEqual([], self.failures[:20])


class Sweep(SweepCase, unittest.TestCase):
    def test_seed_1(self):
        self.sweep(1)

    def test_seed_2(self):
        self.sweep(2)


if __name__ == "__main__":
    unittest.main()
