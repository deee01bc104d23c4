"""Hardening (docs/security.md): input that must be refused with a clear error and leave
memproxy running and its data as it was."""
import json
import os
import re
import select
import shutil
import socket
import sqlite3
import subprocess
import time
import unittest

from harness import (MEMPROXY_BIN, Memproxy, Mock, USER_HI, db_connect, raw_exchange, sanitized,
                     sqlite_only, wait_for)
from test_failures import rss_kb

CONFIG = """
auth:
  admin_keys: [admin-key-0123456789]
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - name: default
    upstream: mock
    summarize: true
    summary_wait: 1s
"""


class Ids(unittest.TestCase):
    """Session and user ids are UTF-8 text wherever they enter: one that is not would read back
    as null and crash or stall the jobs that read it (the summarizer, the idle sweep)."""

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def chat(self, headers=None, path="/v1/chat/completions", body=USER_HI):
        status, _, out = self.mp.request("POST", path, body, headers)
        return status, json.loads(out)

    def api(self, method, path):
        return self.mp.json(method, path, None, {"Authorization": "Bearer admin-key-0123456789"})

    def refused(self, status, out, param):
        self.assertEqual(status, 400, out)
        self.assertEqual(out["error"]["type"], "invalid_request_error")
        self.assertEqual(out["error"]["param"], param)

    def test_ids_that_are_not_text_are_refused_and_nothing_is_stored(self):
        self.refused(*self.chat({"X-Session-Id": b"call-\xff"}), "X-Session-Id")
        self.refused(*self.chat({"X-Session-Id": b"\xc0\xaf"}), "X-Session-Id")  # overlong '/'
        self.refused(*self.chat({"X-Session-Id": b"a\xc2\x85b"}), "X-Session-Id")  # C1 control
        self.refused(*self.chat(path="/v1/chat/completions?session_id=%ff"), "session_id")
        self.refused(*self.chat({"X-Session-Id": b"ok", "X-User-Id": b"\xfe"}), "X-User-Id")
        status, page = self.api("GET", "/v1/sessions")
        self.assertEqual(status, 200, page)
        self.assertEqual(page["sessions"], [])
        self.assertEqual(self.mock.stats()["requests"], 0)

    def test_text_in_any_script_is_an_id(self):
        sid = "café-会議-📞"
        status, out = self.chat({"X-Session-Id": sid.encode(), "X-User-Id": "Zoë".encode()})
        self.assertEqual(status, 200, out)
        status, page = self.api("GET", "/v1/sessions")
        self.assertEqual([s["id"] for s in page["sessions"]], [sid])
        self.assertEqual(page["sessions"][0]["user_id"], "Zoë")
        status, sess = self.api("POST", "/v1/sessions/caf%C3%A9-%E4%BC%9A%E8%AD%B0-%F0%9F%93%9E/stop")
        self.assertEqual(status, 200, sess)

    def test_rest_paths_and_filters_refuse_ids_that_are_not_text(self):
        status, out = self.api("GET", "/v1/sessions/%ff/history")
        self.assertEqual(status, 404, out)
        self.assertIn("UTF-8", out["error"]["message"])
        status, out = self.api("GET", "/v1/sessions?user_id=%ff")
        self.assertEqual((status, out["error"]["param"]), (400, "user_id"), out)
        status, out = self.api("GET", "/v1/webhooks/deliveries?session_id=%c3")
        self.assertEqual((status, out["error"]["param"]), (400, "session_id"), out)
        status, out = self.api("PUT", "/v1/users/%ff/memory")
        self.assertEqual(status, 404, out)


class HostileClients(unittest.TestCase):
    """A request has a whole deadline; framing that could be read two ways is refused; only
    JSON bodies reach the upstream."""

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy("server:\n  request_timeout: 2s\n  client_timeout: 60s\n"
                           "  max_body_size: 64KiB\n  max_header_size: 4KiB\n",
                           upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def raw(self, data):
        return raw_exchange(self.mp.port, data)

    def test_a_client_dripping_its_request_gets_408_at_the_deadline(self):
        body = json.dumps(USER_HI).encode()
        req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
               b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        s = socket.create_connection(("127.0.0.1", self.mp.port), timeout=60)
        got = b""
        for i in range(len(req)):  # a byte every 250 ms: ~45 s for the whole request
            try:
                s.send(req[i:i + 1])
            except OSError:
                break
            r, _, _ = select.select([s], [], [], 0.25)
            if r:
                got = s.recv(65536)
                break
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 408"), got[:200])
        self.assertEqual(json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["code"],
                         "request_timeout")
        self.assertEqual(self.mock.stats()["chat_requests"], 0)
        self.assertEqual(self.answered().get("408"), 1)

    def test_two_content_lengths_or_a_nul_byte_are_400_and_close(self):
        body = json.dumps(USER_HI).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        for extra in (b"Content-Length: %d\r\nContent-Length: 5\r\n" % len(body),
                      b"Content-Length: %d\r\nX-Session-Id: ab\x00cd\r\n" % len(body)):
            out = self.raw(head + extra + b"\r\n" + body)
            self.assertTrue(out.startswith(b"HTTP/1.1 400"), out[:200])
            self.assertIn(b"Connection: close", out)
        self.assertEqual(self.mock.stats()["chat_requests"], 0)

    def test_a_body_far_over_the_limit_is_not_buffered(self):
        # up to a quarter over: read and answered by memproxy's routes; past it evhttp
        # discards the body as it comes and answers 413 itself (the key cannot be checked
        # before the body); either way the client reads the one JSON error
        for size in (70 * 1024, 1 << 20):
            status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", None,
                                                raw=b"x" * size)
            self.assertEqual((status, hdrs.get("content-type")), (413, "application/json"))
            self.assertEqual(json.loads(out)["error"]["code"], "request_too_large", out)
        self.assertEqual(self.mock.stats()["chat_requests"], 0)

    def answered(self):
        """memproxy_requests_total{route="other"} by status."""
        _, _, out = self.mp.request("GET", "/metrics")
        got = {}
        for line in out.decode().splitlines():
            m = re.match(r'memproxy_requests_total\{route="other",status="(\d+)"\} (\d+)', line)
            if m:
                got[m.group(1)] = int(m.group(2))
        return got

    def own_error(self, data):
        """The status and the JSON error of a request evhttp refuses before memproxy's
        routes see it; the connection is closed after it."""
        out = self.raw(data)
        head, _, body = out.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        self.assertEqual(hdrs.get("content-type"), "application/json", out[:300])
        self.assertEqual(hdrs.get("connection"), "close", out[:300])
        self.assertEqual(int(hdrs["content-length"]), len(body), out[:300])
        err = json.loads(body)["error"]
        self.assertTrue(err["message"] and err["type"], err)
        return int(lines[0].split()[1]), err["code"]

    def test_what_evhttp_refuses_itself_gets_the_json_error(self):
        post = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        chunked = post + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        cases = [
            (b"GARBAGE\r\n\r\n", 400, "invalid_request"),
            (b"GET /health HTTP/7.1\r\nHost: x\r\n\r\n", 400, "invalid_request"),
            (b"GET /health HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400,
             "invalid_request"),
            # small enough to be read whole before the answer (a client still sending
            # when the connection closes is reset)
            (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n", 400,
             "invalid_request"),
            (post + b"Content-Length: abc\r\n\r\n", 400, "invalid_request"),
            (b"BREW /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 501,
             "method_not_implemented"),
            (chunked + b"ZZ\r\nabc\r\n0\r\n\r\n", 413, "request_too_large"),
            # a chunk declared far over the limit is refused on its size line, before its
            # bytes come: evhttp does not linger for chunked bodies, so a client still
            # sending would be reset before it read the answer
            (chunked + b"%x\r\n" % (1 << 20) + b"x" * 100, 413, "request_too_large"),
        ]
        before = self.answered()
        for data, status, code in cases:
            self.assertEqual(self.own_error(data), (status, code), data[:60])
        # counted as the routes' answers are, under route="other"
        after = self.answered()
        for status in ("400", "413", "501"):
            self.assertEqual(after.get(status, 0) - before.get(status, 0),
                             sum(1 for c in cases if str(c[1]) == status), status)
        # what evhttp writes on its own and is not an error stays as it is
        body = json.dumps(USER_HI).encode()
        s = socket.create_connection(("127.0.0.1", self.mp.port), timeout=60)
        s.sendall(post + b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        self.assertTrue(s.recv(65536).startswith(b"HTTP/1.1 100 Continue\r\n\r\n"))
        s.sendall(body)
        got = s.recv(65536)
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:200])
        self.assertEqual(self.mock.stats()["chat_requests"], 1)
        # and a kept-alive connection's answers are memproxy's own: one request answered,
        # then a malformed one on the same connection gets the JSON error
        ok = post + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        out = self.raw(ok + body + b"GARBAGE\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:200])
        self.assertIn(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json", out)
        self.assertNotIn(b"<HTML>", out)

    def test_a_target_in_absolute_form_is_served(self):
        # RFC 9112 section 3.2.2: a server must accept "http://host/path" as the request
        # target, not only "/path" (what a client configured to use a proxy sends)
        body = json.dumps(USER_HI).encode()
        out = self.raw(b"POST http://127.0.0.1/v1/chat/completions?x=1 HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/json\r\nConnection: close\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:300])
        self.assertEqual(json.loads(out.split(b"\r\n\r\n", 1)[1])["object"], "chat.completion")
        for target, status in ((b"HTTPS://x:9/healthz?deep=0", b"200"), (b"http://x/v1/models", b"200"),
                               (b"http://x", b"404"), (b"http://x?y=1", b"404")):
            out = self.raw(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target)
            self.assertTrue(out.startswith(b"HTTP/1.1 " + status), (target, out[:300]))
            self.assertIn(b"application/json", out.split(b"\r\n\r\n", 1)[0], target)

    def test_only_json_bodies_are_read(self):
        for ctype in ("text/plain", "application/x-www-form-urlencoded",
                      "multipart/form-data; boundary=x", "application/jsonp"):
            status, _, out = self.mp.request("POST", "/v1/chat/completions", USER_HI,
                                             {"Content-Type": ctype})
            self.assertEqual((status, json.loads(out)["error"]["code"]),
                             (415, "unsupported_media_type"), ctype)
        self.assertEqual(self.mock.stats()["chat_requests"], 0)
        for ctype in ("application/json; charset=utf-8", "Application/JSON",
                      "application/vnd.api+json"):
            status, _, out = self.mp.request("POST", "/v1/chat/completions", USER_HI,
                                             {"Content-Type": ctype})
            self.assertEqual(status, 200, (ctype, out))


class MemoryBudgets(unittest.TestCase):
    """Memory is capped in bytes, not items, and a large request's heap goes back."""
    CONFIG = """
auth:
  admin_keys: [admin-key-0123456789]
memory:
  session_bytes: 4MiB
"""

    def setUp(self):
        self.mock = Mock("--reply", "ok")
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(self.CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def chat(self, content, sid="big"):
        body = {"model": "m", "messages": [{"role": "user", "content": content}]}
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body,
                                         {"X-Session-Id": sid}, timeout=120)
        return status, out

    def gauge(self, name):
        _, _, out = self.mp.request("GET", "/metrics")
        for line in out.decode().splitlines():
            if line.startswith(name + " "):
                return int(line.split()[1])
        raise AssertionError(name + " not in /metrics")

    def test_a_body_of_many_small_values_is_refused_and_its_memory_returned(self):
        self.chat("warm up")
        base = rss_kb(self.mp.proc.pid)
        many = '{"model":"m","messages":[{"role":"user","content":"x"}],"junk":[' + \
            ",".join(["[]"] * 1300000) + "]}"  # 3.9 MB of text, 1.3 M values
        status, _, out = self.mp.request("POST", "/v1/chat/completions", None, raw=many,
                                         timeout=120)
        self.assertEqual((status, json.loads(out)["error"]["code"]), (413, "request_too_large"))
        status, _, out = self.mp.request("PATCH", "/v1/sessions/big", None, raw=many.replace(
            '"junk"', '"metadata"'), headers={"Authorization": "Bearer admin-key-0123456789"})
        self.assertEqual(status, 413, out)
        if sanitized(self.mp.proc.pid):
            return
        # before: ~400 MiB stayed; the cap stops the read early and the heap is trimmed after
        wait_for(lambda: rss_kb(self.mp.proc.pid) - base < 48 * 1024, timeout=60,
                 what="memproxy's memory to come back (RSS %d KiB over)" %
                 (rss_kb(self.mp.proc.pid) - base))

    def test_the_working_set_holds_a_session_to_its_bytes(self):
        big = "w" * (3 << 20)  # 3 MiB a turn
        for i in range(12):
            status, out = self.chat(big + str(i))
            self.assertEqual(status, 200, out[:200])
        held = self.gauge("memproxy_memory_bytes")
        self.assertLessEqual(held, 2 * (3 << 20) + (1 << 20), "the working set holds %d" % held)
        self.assertGreater(held, 3 << 20)  # the newest turn always stays
        status, h = self.mp.json("GET", "/v1/sessions/big/history?limit=100",
                                 headers={"Authorization": "Bearer admin-key-0123456789"})
        self.assertEqual(len([c for c in h["contents"] if c["role"] == "user"]), 12)


class KeyScopes(unittest.TestCase):
    """A key bound to users may act only for them and can be kept from remembered memory;
    profiles may be limited to tenants; /metrics may need a key; Hosts may be limited."""
    CONFIG = """
server:
  allowed_hosts: [memproxy.internal, 127.0.0.1]
metrics:
  key: metrics-key-0123456789
auth:
  client_keys:
    - {key: device-key-0123456789, tenant: a, user: "dev-7*", inject_memory: false}
    - {key: backend-key-0123456789, tenant: a}
    - {key: other-key-0123456789, tenant: b}
upstreams:
  - {name: main, url: "{upstream}"}
profiles:
  - {name: default, upstream: main}
  - {name: vip, upstream: main, tenants: [a]}
"""

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(self.CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def chat(self, key, headers=None, body=USER_HI):
        h = {"Authorization": "Bearer " + key}
        h.update(headers or {})
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body, h)
        return status, json.loads(out)

    def test_a_key_bound_to_users(self):
        self.assertEqual(self.chat("device-key-0123456789", {"X-User-Id": "dev-7-a"})[0], 200)
        for headers in ({"X-User-Id": "dev-8"}, {}):
            status, out = self.chat("device-key-0123456789", headers)
            self.assertEqual((status, out["error"]["param"]), (403, "user"), headers)
        self.assertEqual(self.chat("backend-key-0123456789", {"X-User-Id": "dev-8"})[0], 200)

    def test_memory_is_not_injected_for_a_key_without_it(self):
        self.mp.stop()
        con = db_connect(self.mp.db_path)
        con.execute("INSERT INTO user_summaries(tenant, user_id, summary, updated_ms) "
                    "VALUES ('a', 'dev-7-a', 'Lives at 12 Elm Street.', 1)")
        con.commit()
        con.close()
        self.mp = Memproxy(self.CONFIG, upstream=self.mock.url, db=self.mp.db_path)
        self.addCleanup(self.mp.stop)
        for key, shown in (("device-key-0123456789", False), ("backend-key-0123456789", True)):
            status, _ = self.chat(key, {"X-User-Id": "dev-7-a", "X-Session-Id": "s-" + key[:3]})
            self.assertEqual(status, 200)
            self.assertEqual("Elm Street" in self.mock.stats()["last_body"], shown, key)

    def test_profiles_limited_to_tenants(self):
        vip = {"X-Memproxy-Profile": "vip"}
        self.assertEqual(self.chat("backend-key-0123456789", vip)[0], 200)
        status, out = self.chat("other-key-0123456789", vip)
        self.assertEqual((status, out["error"]["param"]), (403, "profile"))

    def test_metrics_key_and_allowed_hosts(self):
        status, _, _ = self.mp.request("GET", "/metrics")
        self.assertEqual(status, 401)
        status, _, out = self.mp.request("GET", "/metrics", headers={
            "Authorization": "Bearer metrics-key-0123456789"})
        self.assertEqual(status, 200)
        self.assertIn(b"memproxy_requests_total", out)
        status, _, out = self.mp.request("GET", "/healthz", headers={"Host": "evil.example"})
        self.assertEqual((status, json.loads(out)["error"]["code"]), (421, "misdirected_request"))
        status, _, _ = self.mp.request("GET", "/healthz", headers={"Host": "memproxy.internal:80"})
        self.assertEqual(status, 200)
        # a target in absolute form names the host, and the Host header is ignored then
        for target, host, status in ((b"http://memproxy.internal:80/healthz", b"evil.example", 200),
                                     (b"http://evil.example/healthz", b"memproxy.internal", 421),
                                     (b"http://evil.example?x", b"127.0.0.1", 421)):
            out = raw_exchange(self.mp.port, b"GET %s HTTP/1.1\r\nHost: %s\r\n"
                               b"Connection: close\r\n\r\n" % (target, host))
            self.assertTrue(out.startswith(b"HTTP/1.1 %d" % status), (target, out[:200]))


class Viewer(unittest.TestCase):
    """The call viewer's files come from the binary with a strict CSP; ui.enabled: false
    turns them off. (tests/ui drives the page itself in chromium.)"""

    def test_served_with_a_strict_policy_and_can_be_off(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy("", upstream=mock.url)
        self.addCleanup(mp.stop)
        status, hdrs, body = mp.request("GET", "/ui/", headers={"Content-Type": ""})
        self.assertEqual(status, 200)
        self.assertTrue(hdrs["content-type"].startswith("text/html"))
        csp = hdrs["content-security-policy"]
        for directive in ("default-src 'none'", "script-src 'self'", "connect-src 'self'",
                          "frame-ancestors 'none'"):
            self.assertIn(directive, csp)
        self.assertNotIn("unsafe", csp)
        self.assertIn(b'<script src="app.js" defer></script>', body)
        self.assertNotIn(b"<script>", body)  # no inline script
        status, hdrs, _ = mp.request("GET", "/ui/app.js")
        self.assertEqual((status, hdrs["content-type"]), (200, "text/javascript; charset=utf-8"))
        status, hdrs, _ = mp.request("GET", "/ui")
        self.assertEqual((status, hdrs.get("location")), (308, "/ui/"))
        self.assertEqual(mp.request("GET", "/ui/nope.js")[0], 404)
        off = Memproxy("ui:\n  enabled: false\n", upstream=mock.url)
        self.addCleanup(off.stop)
        self.assertEqual(off.request("GET", "/ui/")[0], 404)


class Hardened(unittest.TestCase):
    """The binary is built hardened; the database is its owner's alone."""

    def test_build_flags(self):
        if shutil.which("readelf") is None:
            self.skipTest("readelf is not installed")
        dyn = subprocess.run(["readelf", "-dW", MEMPROXY_BIN], capture_output=True,
                             text=True).stdout
        seg = subprocess.run(["readelf", "-lW", MEMPROXY_BIN], capture_output=True,
                             text=True).stdout
        syms = subprocess.run(["readelf", "--dyn-syms", "-W", MEMPROXY_BIN], capture_output=True,
                              text=True).stdout
        self.assertIn("BIND_NOW", dyn)  # -z now
        self.assertIn("GNU_RELRO", seg)  # -z relro
        self.assertIn("__stack_chk_fail", syms)  # -fstack-protector-strong
        if "libasan" not in dyn:  # the sanitizer builds leave FORTIFY out
            self.assertRegex(syms, r"__\w+_chk")  # _FORTIFY_SOURCE=2 (optimized builds)

    @sqlite_only
    def test_database_and_wal_are_0600(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        old = os.umask(0o022)
        try:
            mp = Memproxy("", upstream=mock.url)
        finally:
            os.umask(old)
        self.addCleanup(mp.stop)
        status, _, _ = mp.request("POST", "/v1/chat/completions", USER_HI, {"X-Session-Id": "p"})
        self.assertEqual(status, 200)
        for suffix in ("", "-wal", "-shm"):
            mode = os.stat(mp.db_path + suffix).st_mode & 0o777
            self.assertEqual(mode, 0o600, suffix or "database")


if __name__ == "__main__":
    unittest.main()
