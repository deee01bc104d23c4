"""Upstream failures, client hang-ups, slow clients and shutdown."""
import json
import os
import sqlite3
import random
import signal
import socket
import threading
import time
import unittest

from harness import (USER_HI, Memproxy, Mock, StackTest, chat_text, cpu_seconds, free_port,
                     raw_connect, raw_read_all, raw_read_until, raw_request, read_response, sse_data, wait_for, db_connect)

STREAM = dict(USER_HI, stream=True)


class UpstreamFailures(StackTest):
    CONFIG = """
upstreams:
  - name: main
    url: {upstream}
    first_byte_timeout: 300ms
"""

    def test_upstream_down_is_502(self):
        dead = "http://127.0.0.1:%d/v1" % free_port()
        mp = Memproxy(upstream=dead)
        self.addCleanup(mp.stop)
        for body in (USER_HI, STREAM):
            status, hdrs, out = mp.request("POST", "/v1/chat/completions", body)
            self.assertEqual(status, 502)
            self.assertEqual(json.loads(out)["error"]["code"], "upstream_unreachable")

    def test_upstream_slower_than_timeout_is_504(self):
        self.mock.config(hang=True)
        t = time.monotonic()
        status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", STREAM)
        self.assertEqual(status, 504)
        self.assertEqual(json.loads(out)["error"]["code"], "upstream_timeout")
        self.assertLess(time.monotonic() - t, 5)

    def test_mid_stream_failure_is_sse_error_and_clean_end(self):
        self.mock.config(drop_after=3, token_delay_ms=5)
        # http.client raises IncompleteRead unless the chunked body ends cleanly
        status, events = self.mp.stream(STREAM)
        self.assertEqual(status, 200)
        self.assertNotIn("[DONE]", events)
        err = json.loads(events[-1])["error"]
        self.assertEqual(err["code"], "upstream_bad_response")
        self.assertEqual(chat_text(events[:-1]), "Hello! This is")

    def test_upstream_error_status_passes_through(self):
        for code in (400, 429, 500):
            self.mock.config(fail_status=code)
            status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", STREAM)
            self.assertEqual(status, code)
            self.assertEqual(json.loads(out)["error"]["code"], "mock_failure")


class Fallback(unittest.TestCase):
    def setUp(self):
        self.bad, self.good = Mock(), Mock("--reply", "from the fallback")
        self.addCleanup(self.bad.stop)
        self.addCleanup(self.good.stop)
        self.dead = "http://127.0.0.1:%d/v1" % free_port()
        self.mp = Memproxy("""
upstreams:
  - {name: dead, url: %s}
  - {name: bad, url: %s}
  - {name: good, url: %s}
profiles:
  - {name: default, upstream: dead, fallbacks: [bad, good]}
""" % (self.dead, self.bad.url, self.good.url))
        self.addCleanup(self.mp.stop)

    def test_fallbacks_tried_before_first_byte(self):
        self.bad.config(fail_status=503)
        status, events = self.mp.stream(STREAM)
        self.assertEqual(status, 200)
        self.assertEqual(chat_text(events), "from the fallback")
        self.assertEqual(self.bad.stats()["chat_requests"], 1)
        _, _, text = self.mp.request("GET", "/metrics")
        self.assertIn("memproxy_upstream_fallbacks_total 2", text.decode())

    def test_4xx_is_not_retried(self):
        self.bad.config(fail_status=400)
        status, _, _ = self.mp.request("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual(status, 400)
        self.assertEqual(self.good.stats()["chat_requests"], 0)


class HangUp(StackTest):
    MOCK_ARGS = ("--token-delay-ms", "50")

    def test_hangup_cancels_upstream_within_100ms(self):
        s = raw_connect(self.mp.port)
        raw_request(s, "/v1/chat/completions", STREAM)
        raw_read_until(s, lambda buf: buf.count(b'"content":') >= 3)
        before = self.mock.stats()["streams_closed_early"]
        t0 = time.monotonic_ns()
        s.close()
        st = wait_for(lambda: (lambda x: x if x["streams_closed_early"] > before else None)(
            self.mock.stats()), what="the mock to see the close")
        delay_ms = (st["last_close_ns"] - t0) / 1e6
        self.assertLess(delay_ms, 100, "upstream saw the hang-up after %.1f ms" % delay_ms)
        self.assertEqual(st["streams_completed"], 0)
        wait_for(lambda: "memproxy_client_disconnects_total 1" in
                 self.mp.request("GET", "/metrics")[2].decode(), what="disconnect metric")
        wait_for(lambda: "memproxy_active_streams 0" in
                 self.mp.request("GET", "/metrics")[2].decode(), what="stream gauge")


class HangUpBeforeFirstToken(StackTest):
    """Barge-in while the model is still thinking: nothing has been written to the client,
    so only memproxy's own watch on the socket can notice."""
    MOCK_ARGS = ("--ttft-ms", "3000")

    def hang_up_after(self, body, wait=0.2, sock=None):
        s = sock or raw_connect(self.mp.port)
        raw_request(s, "/v1/chat/completions", body)
        wait_for(lambda: self.mock.stats()["chat_requests"] > self.before, what="upstream call")
        time.sleep(wait)
        t0 = time.monotonic_ns()
        s.close()
        st = wait_for(lambda: (lambda x: x if x["streams_closed_early"] > self.closed else None)(
            self.mock.stats()), what="the mock to see the close")
        return (st["last_close_ns"] - t0) / 1e6

    def setUp(self):
        super().setUp()
        self.before = self.closed = 0

    def test_stream(self):
        delay = self.hang_up_after(STREAM)
        self.assertLess(delay, 100, "upstream saw the hang-up after %.1f ms" % delay)

    def test_non_stream(self):
        delay = self.hang_up_after(USER_HI)
        self.assertLess(delay, 100, "upstream saw the hang-up after %.1f ms" % delay)

    def test_on_a_kept_alive_connection(self):
        """The watch stays on a connection between its requests: a later request's hang-up is
        seen as promptly as the first's, also right after sending it."""
        s = raw_connect(self.mp.port)
        f = s.makefile("rb")
        self.mock.config(ttft_ms=0)
        for body in (USER_HI, STREAM, USER_HI):
            raw_request(s, "/v1/chat/completions", body)
            self.assertEqual(read_response(f)[0], 200)
        f.close()  # else the socket stays open after s.close()
        self.mock.config(ttft_ms=3000)
        self.before = self.mock.stats()["chat_requests"]
        delay = self.hang_up_after(STREAM, wait=0, sock=s)
        self.assertLess(delay, 100, "upstream saw the hang-up after %.1f ms" % delay)


class Pipelined(StackTest):
    """A client that sends its next request before the answer to the first: memproxy's
    hang-up watch sees bytes evhttp will read only later, and must neither spin on them nor
    stop seeing a hang-up."""
    MOCK_ARGS = ("--ttft-ms", "600")

    def send_two(self, s, body):
        """The second request is sent once the first is at the upstream: evhttp has stopped
        reading, so its bytes wait in the socket (sent together, evhttp would have read both
        into its own buffer)."""
        data = json.dumps(body).encode()
        one = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               "\r\nContent-Length: %d\r\n\r\n" % len(data)).encode() + data
        s.sendall(one)
        wait_for(lambda: self.mock.stats()["chat_requests"] > 0, what="upstream call")
        s.sendall(one)

    def test_no_spinning_while_the_first_waits(self):
        s = raw_connect(self.mp.port)
        self.send_two(s, STREAM)
        cpu = cpu_seconds(self.mp.proc.pid)
        time.sleep(0.4)
        used = cpu_seconds(self.mp.proc.pid) - cpu
        self.assertLess(used, 0.1, "memproxy used %.2f s of CPU waiting 0.4 s" % used)
        f = s.makefile("rb")
        for _ in range(2):
            status, _, text = read_response(f)
            self.assertEqual(status, 200)
            self.assertEqual(sse_data(text.decode())[-1], "[DONE]")
        s.close()

    def test_hang_up_still_seen(self):
        self.mock.config(ttft_ms=3000)
        s = raw_connect(self.mp.port)
        self.send_two(s, STREAM)
        time.sleep(0.2)
        t0 = time.monotonic_ns()
        s.close()
        st = wait_for(lambda: (lambda x: x if x["streams_closed_early"] > 0 else None)(
            self.mock.stats()), what="the mock to see the close")
        delay = (st["last_close_ns"] - t0) / 1e6
        self.assertLess(delay, 100, "upstream saw the hang-up after %.1f ms" % delay)
        self.assertEqual(self.mock.stats()["chat_requests"], 1)


class ConnectionChurn(StackTest):
    """Clients that do everything at once, over two workers: keep-alive, hang-ups at random
    moments (before the answer, mid-stream), pipelined requests, and an upstream that closes
    idle connections. Afterwards memproxy is whole: no stream left open, nothing in flight,
    and it still answers. (Under ASan in scripts/test, any memory error fails it too.)"""
    MOCK_ARGS = ("--token-delay-ms", "2", "--idle-timeout-ms", "30")
    CONFIG = "server:\n  workers: 2\n"

    def one_client(self, seed):
        rnd = random.Random(seed)
        for i in range(25):
            s = raw_connect(self.mp.port)
            try:
                for _ in range(rnd.randint(1, 3)):
                    body = dict(STREAM if rnd.random() < 0.6 else USER_HI)
                    body["messages"] = [{"role": "user", "content": "hi " * rnd.randint(1, 30)}]
                    headers = {"X-Session-Id": "churn-%d-%d" % (seed, i % 5)}
                    raw_request(s, "/v1/chat/completions", body, headers)
                    r = rnd.random()
                    if r < 0.15:
                        raw_request(s, "/v1/chat/completions", STREAM)  # pipelined
                    if r < 0.35:
                        time.sleep(rnd.random() * 0.02)
                        break  # hang up, answered or not
                    f = s.makefile("rb")
                    self.assertEqual(read_response(f)[0], 200)
                    f.close()
                    if rnd.random() < 0.2:
                        time.sleep(0.05)  # the upstream closes its idle connections
            finally:
                s.close()

    def client(self, seed, failures):
        try:
            self.one_client(seed)
        except Exception as e:  # reported by the test's own thread
            failures.append("client %d: %r" % (seed, e))

    def test_memproxy_stays_whole(self):
        failures = []
        threads = [threading.Thread(target=self.client, args=(n, failures)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        metrics = lambda: self.mp.request("GET", "/metrics")[2].decode()
        wait_for(lambda: "memproxy_active_streams 0" in metrics(), what="streams to end")
        status, body = self.mp.json("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual((status, body["object"]), (200, "chat.completion"))


class UpstreamClosesIdleConnections(StackTest):
    """An upstream that closes kept-alive connections after a while (as real servers do):
    memproxy keeps watching an idle upstream connection, so the close wakes it; it must let
    go of the socket then (not spin on it) and the next request must open a new one."""
    MOCK_ARGS = ("--idle-timeout-ms", "100")

    def test_closed_while_idle(self):
        for _ in range(3):
            status, body = self.mp.json("POST", "/v1/chat/completions", USER_HI)
            self.assertEqual(status, 200)
            self.assertEqual(body["object"], "chat.completion")
            cpu = cpu_seconds(self.mp.proc.pid)
            time.sleep(0.4)  # the mock closes the connection after 0.1 s
            used = cpu_seconds(self.mp.proc.pid) - cpu
            self.assertLess(used, 0.1, "memproxy used %.2f s of CPU while idle" % used)
        self.assertEqual(self.mock.stats()["chat_requests"], 3)


class UpstreamByName(UpstreamClosesIdleConnections):
    """The same with the upstream named "localhost": curl resolves it on its resolver thread,
    whose wake-up socket memproxy did not open, and where localhost is ::1 too, its first
    connect is refused (a socket curl closes without telling). Streams and hang-ups too."""

    def setUp(self):
        self.mock = Mock(*self.MOCK_ARGS)
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(upstream=self.mock.url.replace("127.0.0.1", "localhost"))
        self.addCleanup(self.mp.stop)

    def test_streams_and_hang_ups(self):
        for i in range(6):
            if i % 2:
                s = raw_connect(self.mp.port)
                raw_request(s, "/v1/chat/completions", STREAM)
                s.recv(1)
                s.close()
            status, events = self.mp.stream(STREAM)
            self.assertEqual((status, events[-1]), (200, "[DONE]"))
            time.sleep(0.15 * (i % 3))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class SlowClient(StackTest):
    CONFIG = """
server:
  max_client_buffer: 64KiB
"""
    WORDS = 100000  # about 18 MB of SSE

    def test_slow_client_pauses_upstream_not_memory(self):
        self.mock.config(reply=" ".join(["w"] * self.WORDS))
        base = rss_kb(self.mp.proc.pid)
        s = raw_connect(self.mp.port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        raw_request(s, "/v1/chat/completions", STREAM)
        time.sleep(1.0)  # the client reads nothing; upstream has all 12 MB ready
        grown = rss_kb(self.mp.proc.pid) - base
        self.assertLess(grown, 4096, "memproxy buffered %d KiB for a client that reads nothing"
                        % grown)
        # A loaded machine (the ASan run beside other work) may take long to push 18 MB
        # through: each read waits as long as it needs; meson's 300 s bounds a real hang.
        s.settimeout(240)
        buf = bytearray()
        while not buf.endswith(b"0\r\n\r\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
        s.close()
        self.assertEqual(buf.count(b'"content":"w"') + buf.count(b'"content":" w"'), self.WORDS)
        self.assertIn(b"data: [DONE]", buf)


class Shutdown(unittest.TestCase):
    def test_sigterm_lets_stream_finish_and_exits_0(self):
        mock = Mock("--token-delay-ms", "40", "--reply", "a b c d e f g h i j")
        self.addCleanup(mock.stop)
        mp = Memproxy(upstream=mock.url)
        s = raw_connect(mp.port)
        raw_request(s, "/v1/chat/completions", STREAM)
        buf = s.recv(65536)
        mp.proc.send_signal(signal.SIGTERM)
        while not buf.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        s.close()
        self.assertIn(b"data: [DONE]", buf)
        events = sse_data(buf.decode().split("\r\n\r\n", 1)[1])
        self.assertEqual(chat_text([e for e in events if e.startswith(("{", "["))]),
                         "a b c d e f g h i j")
        self.assertEqual(mp.terminate(), 0)
        self.assertIn("stopped", mp.output())
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", mp.port), timeout=1).recv(1)

    def test_only_the_main_thread_takes_sigterm(self):
        """Every thread but the main one blocks SIGTERM and SIGINT. The kernel hands a
        process's signal to any thread that does not block it, and there its default action
        ends memproxy undrained: a SIGTERM sent just after memproxy began listening, before the
        main thread entered sigwait(), killed it (a store's checkpoint thread, the read pool's
        threads under PostgreSQL). Read off /proc, so it needs no lucky timing."""
        mp = Memproxy(upstream="http://127.0.0.1:%d/v1" % free_port())  # never called
        self.addCleanup(mp.stop)
        task_dir = "/proc/%d/task" % mp.proc.pid
        tids = [int(t) for t in os.listdir(task_dir)]
        self.assertGreater(len(tids), 3)  # workers, the store's writer and its helpers
        wanted = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
        for tid in tids:
            if tid == mp.proc.pid:  # the main thread, in sigwait() (which unblocks them)
                continue
            with open("%s/%d/status" % (task_dir, tid)) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            blocked = int(fields["SigBlk"].strip(), 16)
            self.assertEqual(blocked & wanted, wanted,
                             "thread %d (%s) takes SIGTERM or SIGINT" % (tid, fields["Name"].strip()))

    def test_shutdown_timeout_bounds_a_long_stream(self):
        mock = Mock("--token-delay-ms", "200")
        self.addCleanup(mock.stop)
        mp = Memproxy("server:\n  shutdown_timeout: 300ms\n", upstream=mock.url)
        s = raw_connect(mp.port)
        raw_request(s, "/v1/chat/completions", STREAM, {"X-Session-Id": "cut-by-shutdown"})
        raw_read_until(s, lambda b: b.count(b'"content"') >= 3)  # a few words heard
        t = time.monotonic()
        mp.proc.send_signal(signal.SIGTERM)
        self.assertEqual(mp.proc.wait(10), 0)
        self.assertLess(time.monotonic() - t, 5)
        self.assertIn(b"shutting_down", raw_read_all(s))
        mp.log.close()
        # what was heard is recorded, and says the shutdown cut it (not an upstream error)
        con = db_connect(mp.db_path)
        rows = con.execute("SELECT finish_reason, content FROM messages WHERE role = "
                           "'assistant'").fetchall()
        con.close()
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0][0], "shutdown")
        self.assertTrue(rows[0][1].startswith("Hello!"), rows)


class UpstreamTimeouts(unittest.TestCase):
    """idle_timeout is the longest silence after the headers; the answer says it timed out."""

    def setUp(self):
        self.mock = Mock("--reply", "one two three four five six")
        self.addCleanup(self.mock.stop)

    def start(self, url, extra=""):
        mp = Memproxy("upstreams:\n  - name: main\n    url: %s\n%s" % (url, extra),
                      upstream=self.mock.url)
        self.addCleanup(mp.stop)
        return mp

    def test_a_silence_longer_than_idle_timeout_ends_the_reply_as_a_timeout(self):
        # 9 s of silence after two words; curl's low-speed check let 3-5 s through a 2 s
        # limit and tripped ~8 s after the last byte as upstream_bad_response
        self.mock.config(stall_after=2, stall_ms=9000)
        mp = self.start(self.mock.url, "    idle_timeout: 3s\n")
        status, events = mp.stream(STREAM, {"X-Session-Id": "idle"})
        self.assertEqual(status, 200)
        err = json.loads(events[-1])["error"]
        self.assertEqual(err["code"], "upstream_timeout", events)
        self.assertEqual(chat_text(events[:-1]), "one two")
        # a silence shorter than the limit is not one
        self.mock.config(stall_after=2, stall_ms=300)
        status, events = mp.stream(STREAM, {"X-Session-Id": "idle-2"})
        self.assertEqual(chat_text(events), "one two three four five six")
        mp.stop()
        con = db_connect(mp.db_path)
        reasons = con.execute("SELECT finish_reason FROM messages m JOIN sessions s USING (sid) "
                              "WHERE s.id = 'idle' AND role = 'assistant'").fetchall()
        con.close()
        self.assertEqual(reasons, [("upstream_timeout",)])

    def test_retry_after_of_a_429_reaches_the_client(self):
        self.mock.config(fail_status=429, retry_after="7")
        mp = self.start(self.mock.url)
        for body in (USER_HI, STREAM):
            status, hdrs, out = mp.request("POST", "/v1/chat/completions", body)
            self.assertEqual((status, hdrs.get("retry-after")), (429, "7"), out)
        self.mock.config(fail_status=503, retry_after="7\x01")  # not text: not passed on
        status, hdrs, _ = mp.request("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual((status, hdrs.get("retry-after")), (503, None))

    def test_a_connect_timeout_is_502_as_documented(self):
        # a listener whose backlog is full: the kernel drops new SYNs, connect() hangs
        full = socket.socket()
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        self.addCleanup(full.close)
        fillers = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(full.getsockname())
            fillers.append(c)
        self.addCleanup(lambda: [c.close() for c in fillers])
        url = "http://127.0.0.1:%d/v1" % full.getsockname()[1]
        mp = self.start(url, "    connect_timeout: 300ms\n")
        status, _, out = mp.request("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual((status, json.loads(out)["error"]["code"]), (502, "upstream_unreachable"),
                         out)


if __name__ == "__main__":
    unittest.main()
