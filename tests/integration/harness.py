"""Integration harness: start the mock upstream and memproxy on free loopback ports, talk
real HTTP to them, stop them. Every test process owns its servers; nothing leaves 127.0.0.1.

Binaries come from the environment (meson sets them): MEMPROXY_BIN, MOCK_UPSTREAM_BIN.

The store: SQLite by default. With MEMPROXY_TEST_BACKEND=postgresql every memproxy a test
starts runs on a database of its own in a PostgreSQL server: MEMPROXY_TEST_PG's (a base URL,
postgresql://user@127.0.0.1:port, which scripts/test starts once for the whole run), or else
a throw-away cluster this test process starts and stops (tests/pgcluster.py). A memproxy
started again on an earlier one's db_path gets that one's database. db_connect(mp) opens
what a test reads behind memproxy's back, as sqlite3 would, on either.
"""
import atexit
import hashlib
import http.client
import json
import os
import re
import sqlite3
import sys
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

MEMPROXY_BIN = os.environ.get("MEMPROXY_BIN", "build/proxy/memproxy")
MOCK_BIN = os.environ.get("MOCK_UPSTREAM_BIN", "build/tests/mock_upstream")

# Every directory a test makes (configs, databases, logs) lives under one per test process,
# removed when it exits: a restarted memproxy may still open an earlier one's database.
SCRATCH = tempfile.mkdtemp(prefix="memproxy-tests-")
atexit.register(shutil.rmtree, SCRATCH, True)


def scratch_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=SCRATCH)


BACKEND = os.environ.get("MEMPROXY_TEST_BACKEND", "sqlite")
# an empty MEMPROXY_TEST_PG means none given, as unset
_pg = {"url": os.environ.get("MEMPROXY_TEST_PG") or None, "cluster": None, "made": set()}


def pg_base_url():
    """The PostgreSQL server of this run (started on first use when none was given)."""
    if _pg["url"] is None:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        import pgcluster
        c = pgcluster.Cluster()
        atexit.register(c.stop)
        _pg["cluster"] = c
        _pg["url"] = c.url
    return _pg["url"]


def pg_psql(db, sql):
    """Run sql in database db of this run's server; its output (unaligned, tuples only)."""
    out = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1",
                          "%s/%s" % (pg_base_url(), db), "-c", sql],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError("psql: %s" % out.stderr.strip())
    return out.stdout


def _pg_drop_made():
    """On a server the run was given (MEMPROXY_TEST_PG), drop the databases it made: a
    developer's long-lived server otherwise keeps every run's (gigabytes after some days).
    A server the run started goes away whole."""
    for name in sorted(_pg["made"]):
        try:
            pg_psql("postgres", 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        except (AssertionError, OSError, subprocess.SubprocessError):
            pass  # the server went first: nothing left to tidy


def pg_database_for(db_path):
    """The database standing for the SQLite file db_path (made on first use): its URL."""
    name = "t_%d_%s" % (os.getpid(), hashlib.sha1(db_path.encode()).hexdigest()[:16])
    if name not in _pg["made"]:
        pg_psql("postgres", 'CREATE DATABASE "%s"' % name)
        if not _pg["made"] and _pg["cluster"] is None:
            atexit.register(_pg_drop_made)
        _pg["made"].add(name)
    return "%s/%s" % (pg_base_url(), name)


def _sql_literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, bytes):
        return "'\\x%s'::bytea" % v.hex()
    return "'" + str(v).replace("'", "''") + "'"


class Row(tuple):
    """A row as sqlite3.Row reads: by index, by column name, and equal to its tuple."""

    def __new__(cls, names, values):
        r = super().__new__(cls, values)
        r._names = names
        return r

    def __getitem__(self, k):
        if isinstance(k, str):
            return tuple.__getitem__(self, self._names.index(k))
        return tuple.__getitem__(self, k)

    def keys(self):
        return list(self._names)


class _PgCursor:
    def __init__(self, rows):
        self.rows = rows

    def fetchall(self):
        return self.rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def __iter__(self):
        return iter(self.rows)


class PgConnection:
    """What the tests do with a sqlite3 connection (execute with ? parameters, fetch rows),
    on the PostgreSQL database of a memproxy, through psql."""

    def __init__(self, url):
        self.url = url
        self.row_factory = None

    def execute(self, sql, params=()):
        parts = sql.split("?")
        if len(parts) - 1 != len(params):
            raise AssertionError("parameters do not match: %s" % sql)
        q = parts[0] + "".join(_sql_literal(v) + rest for v, rest in zip(params, parts[1:]))
        head = q.lstrip().split(None, 1)[0].upper()
        if head not in ("SELECT", "WITH"):
            self._psql(q)
            return _PgCursor([])
        wrapped = "SELECT COALESCE(json_agg(row_to_json(t)), '[]') FROM (%s) t" % q
        rows = json.loads(self._psql(wrapped) or "[]")
        return _PgCursor([Row(list(r.keys()), list(r.values())) for r in rows])

    def _psql(self, q):
        out = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", self.url, "-c", q],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise AssertionError("psql: %s\n%s" % (out.stderr.strip(), q))
        return out.stdout.strip()

    def commit(self):
        pass

    def close(self):
        pass


def db_connect(db_path, readonly=False):
    """The database of a memproxy started on db_path, to read (or tamper with) as a test:
    sqlite3's connection on SQLite, one that reads the same through psql on PostgreSQL."""
    if BACKEND == "postgresql":
        return PgConnection(pg_database_for(db_path))
    if readonly:
        return sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    return sqlite3.connect(db_path)


def sqlite_only(test):
    """A test of what only the SQLite file has (its mode, its migrations, its WAL)."""
    return unittest.skipIf(BACKEND != "sqlite", "reads the SQLite file itself")(test)


def wait_for(pred, timeout=5.0, step=0.005, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out waiting for " + what)


class Mock:
    """The mock upstream (tests/mock_upstream), on a free port."""

    def __init__(self, *args):
        self.dir = scratch_dir("mock-")
        pf = os.path.join(self.dir, "port")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen([MOCK_BIN, "--port-file", pf, *args],
                                     stdout=self.log, stderr=self.log)
        self.port = int(wait_for(lambda: _read(pf), what="mock port"))
        self.url = "http://127.0.0.1:%d/v1" % self.port

    def _call(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        c.request(method, path, body=json.dumps(body) if body is not None else None)
        r = c.getresponse()
        data = json.loads(r.read())
        c.close()
        return data

    def config(self, **kw):
        return self._call("POST", "/_mock/config", kw)

    def stats(self):
        return self._call("GET", "/_mock/stats")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(5)
        self.log.close()


def _read(path):
    try:
        with open(path) as f:
            s = f.read().strip()
            return s or None
    except FileNotFoundError:
        return None


class Memproxy:
    """memproxy started with an inline YAML config; {upstream} in it is replaced by url."""

    def __init__(self, config="", args=(), env=None, upstream=None, db=None, preexec=None):
        self.dir = scratch_dir("memproxy-")
        self.db_path = db or os.path.join(self.dir, "memproxy.db")
        self.config_path = os.path.join(self.dir, "memproxy.yaml")
        if upstream is not None:
            config = config.replace("{upstream}", upstream)
        with open(self.config_path, "w") as f:
            f.write(config)
        self.log_path = os.path.join(self.dir, "log")
        self.log = open(self.log_path, "w")
        cmd = [MEMPROXY_BIN, "--config", self.config_path, "--listen", "127.0.0.1:0", *args]
        if "storage:" not in config and "--db" not in args:
            cmd += ["--db", self.db_path]
        self.pg_url = None
        if BACKEND == "postgresql" and "MEMPROXY_DATABASE_URL" not in (env or {}):
            self.pg_url = pg_database_for(self.db_path)
        if upstream is not None and "upstreams:" not in config:
            cmd += ["--upstream", upstream]
        e = dict(os.environ)
        for k in ("MEMPROXY_UPSTREAM_URL", "MEMPROXY_UPSTREAM_API_KEY", "OPENAI_API_KEY",
                  "MEMPROXY_CLIENT_KEY", "http_proxy", "https_proxy", "HTTPS_PROXY",
                  "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
            e.pop(k, None)  # the machine's own settings must not steer a test's traffic
        if self.pg_url is not None:
            e["MEMPROXY_DATABASE_URL"] = self.pg_url
        e.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, env=e,
                                     preexec_fn=preexec)
        self.port = int(wait_for(self._port, what="memproxy to listen"))

    def _port(self):
        if self.proc.poll() is not None:
            raise AssertionError("memproxy exited early:\n" + self.output())
        m = re.search(r"\(port (\d+)\)", self.output())
        return m and m.group(1)

    def output(self):
        with open(self.log_path) as f:
            return f.read()

    def request(self, method, path, body=None, headers=None, raw=None, timeout=10):
        """One request; returns (status, headers dict (lower-case), body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, out

    def json(self, method, path, body=None, headers=None):
        status, hdrs, out = self.request(method, path, body, headers)
        return status, json.loads(out) if out else None

    def stream(self, body, headers=None, path="/v1/chat/completions"):
        """A streaming chat request; returns (status, list of SSE data strings)."""
        status, hdrs, out = self.request("POST", path, body, headers)
        return status, sse_data(out.decode())

    def terminate(self, timeout=15):
        """SIGTERM and wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()

    def stop(self):
        rc = self.terminate()
        if rc != 0:
            raise AssertionError("memproxy exited with %s:\n%s" % (rc, self.output()))


def sse_data(text):
    """The data fields of an SSE body, in order."""
    out = []
    for block in re.split(r"\r?\n\r?\n", text):
        lines = [l[5:].lstrip(" ") if l.startswith("data:") else None for l in block.splitlines()]
        lines = [l for l in lines if l is not None]
        if lines:
            out.append("\n".join(lines))
    return out


def chat_text(events):
    """Joined delta content of a list of SSE data strings."""
    text = ""
    for d in events:
        if d == "[DONE]":
            continue
        obj = json.loads(d)
        for ch in obj.get("choices", []):
            text += ch.get("delta", {}).get("content") or ""
    return text


def raw_connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def raw_read_until(sock, done):
    """Read until done(bytes so far) holds; a connection closed first (memproxy gone) fails
    the test instead of looping on empty reads."""
    buf = b""
    while not done(buf):
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed after %d bytes: %r" % (len(buf), buf[-200:]))
        buf += chunk
    return buf


def raw_read_all(sock):
    """Read until the peer closes."""
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


def raw_exchange(port, data):
    """Send data on a new connection and read everything until memproxy closes it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(data)
        return raw_read_all(s)
    finally:
        s.close()


def raw_request(sock, path, body, headers=None):
    data = json.dumps(body).encode()
    h = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
    sock.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: %d\r\n%s\r\n" % (path, len(data), h)).encode() + data)


def read_response(f):
    """One HTTP/1.x response from a buffered socket file: (status, headers, body)."""
    status = int(f.readline().split()[1])
    headers = {}
    while True:
        line = f.readline().decode().strip()
        if not line:
            break
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            n = int(f.readline().strip(), 16)
            chunk = f.read(n + 2)[:n]
            if n == 0:
                break
            body += chunk
    elif "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    else:  # HTTP/1.0: the body ends when the connection does
        body = f.read()
    return status, headers, body


def cpu_seconds(pid):
    """User + system CPU time a process has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sanitized(pid):
    """Is the process built with AddressSanitizer? Its allocator keeps freed memory in a
    quarantine, so RSS says nothing about what memproxy gives back."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


USER_HI = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


class StackTest(unittest.TestCase):
    """A test case with a mock upstream and a memproxy in front of it."""
    MOCK_ARGS = ()
    CONFIG = ""

    def setUp(self):
        self.mock = Mock(*self.MOCK_ARGS)
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(self.CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)
