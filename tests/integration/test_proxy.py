"""The request path through memproxy to the mock upstream: what a client sees."""
import json
import re
import socket
import time
import unittest

from harness import (USER_HI, Memproxy, Mock, StackTest, chat_text, raw_connect, raw_request,
                     read_response, sse_data)


def stream_body(**extra):
    b = dict(USER_HI, stream=True)
    b.update(extra)
    return b


class Streaming(StackTest):
    MOCK_ARGS = ("--token-delay-ms", "30", "--reply", "one two three four five")

    def test_tokens_arrive_one_by_one(self):
        """Each token reaches the client when upstream sends it, not at the end."""
        s = raw_connect(self.mp.port)
        raw_request(s, "/v1/chat/completions", stream_body())
        arrivals, buf = [], b""
        while b"data: [DONE]" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            n = chunk.count(b'"content":"')
            arrivals += [time.monotonic()] * n
        s.close()
        self.assertIn(b"text/event-stream", buf)
        # role chunk + 5 tokens; the 30 ms spacing must survive the proxy
        self.assertGreaterEqual(len(arrivals), 6)
        spread = arrivals[-1] - arrivals[1]
        self.assertGreater(spread, 0.09, "tokens were batched, not streamed")

    def test_stream_text_equals_non_stream_text(self):
        status, events = self.mp.stream(stream_body())
        self.assertEqual(status, 200)
        self.assertEqual(events[-1], "[DONE]")
        status, body = self.mp.json("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual(status, 200)
        self.assertEqual(chat_text(events), body["choices"][0]["message"]["content"])
        self.assertEqual(chat_text(events), "one two three four five")

    def test_usage_chunk_only_when_asked(self):
        _, events = self.mp.stream(stream_body())
        self.assertFalse(any(json.loads(e).get("choices") == [] for e in events[:-1]),
                         "client did not ask for usage but got the usage chunk")
        # memproxy still asked upstream for it (to record it)
        sent = json.loads(self.mock.stats()["last_body"])
        self.assertTrue(sent["stream_options"]["include_usage"])
        _, events = self.mp.stream(stream_body(stream_options={"include_usage": True}))
        usage = [json.loads(e) for e in events[:-1] if json.loads(e).get("choices") == []]
        self.assertEqual(len(usage), 1)
        self.assertEqual(usage[0]["usage"]["completion_tokens"], 5)


class Passthrough(StackTest):
    CONFIG = """
upstreams:
  - name: main
    url: {upstream}
    api_key: sk-upstream-secret
auth:
  client_keys:
    - key: client-key-1-0123456789abcdef
      tenant: acme
"""

    def auth(self, key="client-key-1-0123456789abcdef"):
        return {"Authorization": "Bearer " + key}

    def test_client_key_never_forwarded(self):
        status, _ = self.mp.json("POST", "/v1/chat/completions", USER_HI, self.auth())
        self.assertEqual(status, 200)
        self.assertEqual(self.mock.stats()["last_authorization"], "Bearer sk-upstream-secret")

    def test_wrong_or_missing_key_is_401(self):
        for headers in ({}, self.auth("nope"), {"Authorization": "Basic abc"}):
            status, hdrs, body = self.mp.request("POST", "/v1/chat/completions", USER_HI, headers)
            self.assertEqual(status, 401)
            err = json.loads(body)["error"]
            self.assertEqual(err["code"], "invalid_api_key")
            self.assertEqual(hdrs.get("www-authenticate"), "Bearer")
        self.assertEqual(self.mock.stats()["chat_requests"], 0)

    def test_models_and_embeddings_forwarded(self):
        status, body = self.mp.json("GET", "/v1/models", headers=self.auth())
        self.assertEqual(status, 200)
        self.assertEqual(body["data"][0]["id"], "mock-model")
        status, body = self.mp.json("POST", "/v1/embeddings",
                                    {"model": "e", "input": ["a", "b"]}, self.auth())
        self.assertEqual(status, 200)
        self.assertEqual(len(body["data"]), 2)
        self.assertEqual(self.mock.stats()["last_authorization"], "Bearer sk-upstream-secret")

    def test_request_fields_reach_upstream_unchanged(self):
        body = dict(USER_HI, temperature=0.25, max_tokens=7, tools=[
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
        self.mp.json("POST", "/v1/chat/completions", body, self.auth())
        sent = json.loads(self.mock.stats()["last_body"])
        for k in ("model", "messages", "temperature", "max_tokens", "tools"):
            self.assertEqual(sent[k], body[k], k)


class BadInput(StackTest):
    CONFIG = """
server:
  max_body_size: 2KiB
  max_json_depth: 16
"""

    def check_error(self, status, hdrs, body, want_status, want_code):
        self.assertEqual(status, want_status, body)
        self.assertTrue(hdrs["content-type"].startswith("application/json"))
        err = json.loads(body)["error"]
        self.assertEqual(err["code"], want_code)
        self.assertTrue(err["message"])
        self.assertIn("type", err)

    def test_body_over_limit_is_413_json(self):
        big = dict(USER_HI, messages=[{"role": "user", "content": "x" * 4096}])
        self.check_error(*self.mp.request("POST", "/v1/chat/completions", big), 413,
                         "request_too_large")
        self.assertEqual(self.mock.stats()["chat_requests"], 0)

    def test_malformed_json_is_400_json(self):
        for raw in (b"{bad", b"", b"[1,2]", b'{"messages": 5}', b"\xff\xfe", b"null",
                    b'{"messages":[]}', b'{"messages":[{"role":"robot","content":"x"}]}',
                    b'{"messages":[{"role":"user"}]}', b'{"messages":[{"role":"user","content":1}]}',
                    b'{"messages":[{"role":"user","content":"x"}],"stream":"yes"}',
                    b"[" * 100 + b"]" * 100):
            status, hdrs, body = self.mp.request("POST", "/v1/chat/completions", raw=raw)
            self.assertEqual(status, 400, raw)
            err = json.loads(body)["error"]
            self.assertEqual(err["type"], "invalid_request_error", raw)
        self.assertEqual(self.mock.stats()["chat_requests"], 0)

    def test_unreadable_json_says_where_and_why(self):
        """Bodies most encoders write and memproxy's reader refuses: the message names the
        place and the reason, not only "not valid JSON"."""
        for raw, where in ((b'{"messages":[{"role":"user","content":"a\\u0000b"}]}',
                            "line 1, column 41: \\u0000 is not allowed"),
                           (b'{"messages":[{"role":"user","content":"a\\ud83d"}]}',
                            "line 1, column 41: invalid Unicode surrogate pair"),
                           (b'{"messages":[{"role":"user","content":"a\xff"}]}',
                            "line 1, column 41: invalid UTF-8")):
            status, _, body = self.mp.request("POST", "/v1/chat/completions", raw=raw)
            self.assertEqual(status, 400, raw)
            err = json.loads(body)["error"]
            self.assertEqual(err["code"], "invalid_json", raw)
            self.assertEqual(err["message"], "the body is not valid JSON (%s)" % where, raw)
        self.assertEqual(self.mock.stats()["chat_requests"], 0)

    def test_param_names_the_bad_field(self):
        raw = b'{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}'
        _, _, body = self.mp.request("POST", "/v1/chat/completions", raw=raw)
        self.assertEqual(json.loads(body)["error"]["param"], "messages[1].role")

    def test_unknown_route_and_method(self):
        self.check_error(*self.mp.request("GET", "/v2/nothing"), 404, "not_found")
        status, hdrs, body = self.mp.request("GET", "/v1/chat/completions")
        self.check_error(status, hdrs, body, 405, "method_not_allowed")
        self.assertEqual(hdrs["allow"], "POST")


class Profiles(unittest.TestCase):
    def setUp(self):
        self.a, self.b = Mock("--reply", "from a"), Mock("--reply", "from b")
        self.addCleanup(self.a.stop)
        self.addCleanup(self.b.stop)
        self.mp = Memproxy("""
upstreams:
  - {name: a, url: %s}
  - {name: b, url: %s}
profiles:
  - {name: default, upstream: a}
  - {name: other, upstream: b, model: forced-model}
""" % (self.a.url, self.b.url))
        self.addCleanup(self.mp.stop)

    def content(self, path="/v1/chat/completions", body=USER_HI, headers=None):
        status, body = self.mp.json("POST", path, body, headers)
        self.assertEqual(status, 200, body)
        return body["choices"][0]["message"]["content"]

    def test_profile_by_path_header_and_body(self):
        self.assertEqual(self.content(), "from a")
        self.assertEqual(self.content("/p/other/v1/chat/completions"), "from b")
        self.assertEqual(self.content("/p/other/chat/completions"), "from b")
        self.assertEqual(self.content(headers={"X-Memproxy-Profile": "other"}), "from b")
        self.assertEqual(self.content(body=dict(USER_HI, profile="other")), "from b")
        sent = json.loads(self.b.stats()["last_body"])
        self.assertNotIn("profile", sent)
        self.assertEqual(sent["model"], "forced-model")

    def test_unknown_profile(self):
        status, body = self.mp.json("POST", "/p/nope/v1/chat/completions", USER_HI)
        self.assertEqual(status, 404)
        status, body = self.mp.json("POST", "/v1/chat/completions", USER_HI,
                                    {"X-Memproxy-Profile": "nope"})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["param"], "X-Memproxy-Profile")


class ParseMemo(unittest.TestCase):
    """A voice platform resends its window each turn: messages read before are not read again
    (server.parse_memo), never across tenants, and the upstream sees the same request."""
    CONFIG = """
upstreams: [{name: main, url: %s}]
auth:
  client_keys:
    - {key: key-acme-0123456789abcdef, tenant: acme}
    - {key: key-globex-0123456789abcdef, tenant: globex}
"""

    def start(self, extra=""):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(self.CONFIG % self.mock.url + extra, args=("--workers", "1"))
        self.addCleanup(self.mp.stop)

    @staticmethod
    def window(turns):
        msgs = [{"role": "system", "content": "You are a voice assistant."}]
        for t in range(1, turns + 1):
            msgs.append({"role": "user", "content": "question %d" % t, "turn_id": t,
                         "metadata": {"source": "asr"}})
            msgs.append({"role": "assistant", "content": "answer %d" % t, "turn_id": t,
                         "metadata": {"source": "llm"}})
        return {"model": "m", "messages": msgs}

    def send(self, body, key, session):
        status, reply = self.mp.json("POST", "/v1/chat/completions", body,
                                     {"Authorization": "Bearer " + key, "X-Session-Id": session})
        self.assertEqual(status, 200, reply)
        return json.loads(self.mock.stats()["last_body"])["messages"]

    def lookups(self):
        text = self.mp.request("GET", "/metrics")[2].decode()
        return [int(re.search(r'memproxy_parse_memo_lookups_total\{result="%s"\} (\d+)' % r,
                              text).group(1)) for r in ("hit", "miss")]

    def test_window_read_once_per_tenant(self):
        self.start()
        first = self.send(self.window(1), "key-acme-0123456789abcdef", "s1")
        self.assertEqual(self.lookups(), [0, 3])
        grown = self.send(self.window(2), "key-acme-0123456789abcdef", "s1")
        self.assertEqual(self.lookups(), [3, 5])  # the first three were not read again
        self.assertEqual(grown[:3], first)
        self.assertEqual(grown[3], {"role": "user", "content": "question 2"})
        other = self.send(self.window(2), "key-globex-0123456789abcdef", "s1")
        self.assertEqual(self.lookups(), [3, 10])  # another tenant's: read again
        self.assertEqual(other, grown)

    def test_off(self):
        self.start("server: {parse_memo: 0}\n")
        a = self.send(self.window(2), "key-acme-0123456789abcdef", "s1")
        b = self.send(self.window(2), "key-acme-0123456789abcdef", "s1")
        self.assertEqual(a, b)
        self.assertEqual(self.lookups(), [0, 0])


class OutgoingProxy(unittest.TestCase):
    """An HTTP proxy named in the environment (http_proxy, no_proxy) is used as curl uses it;
    memproxy reads the environment once, at start."""

    def setUp(self):
        self.proxy, self.direct = Mock("--reply", "via proxy"), Mock("--reply", "direct")
        self.addCleanup(self.proxy.stop)
        self.addCleanup(self.direct.stop)

    def start(self, upstream, **env):
        mp = Memproxy(upstream=upstream, env=env)
        self.addCleanup(mp.stop)
        status, body = mp.json("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual(status, 200, body)
        return body["choices"][0]["message"]["content"]

    def test_http_proxy_from_environment(self):
        proxy = "http://127.0.0.1:%d" % self.proxy.port
        # a host that exists nowhere: only the proxy can answer for it
        self.assertEqual(self.start("http://upstream.invalid/v1", http_proxy=proxy), "via proxy")
        self.assertEqual(self.proxy.stats()["last_target"],
                         "http://upstream.invalid/v1/chat/completions")

    def test_no_proxy_bypasses_it(self):
        proxy = "http://127.0.0.1:%d" % self.proxy.port
        self.assertEqual(self.start(self.direct.url, http_proxy=proxy, no_proxy="127.0.0.1"),
                         "direct")
        self.assertEqual(self.proxy.stats()["requests"], 0)
        self.assertEqual(self.direct.stats()["last_target"], "/v1/chat/completions")


class Connections(StackTest):
    """Responses are written as soon as they are ready and evhttp's bookkeeping of the
    connection completes at once: keep-alive, Connection: close, HTTP/1.0 and pipelined
    requests must all still get whole answers, recorded or not."""

    def send(self, s, requests):
        """Sends every request in one write (so the later ones wait in memproxy's buffer)."""
        data = b""
        for version, path, body, headers in requests:
            h = "".join("%s: %s\r\n" % kv for kv in headers.items())
            if body is None:
                data += ("GET %s HTTP/%s\r\nHost: x\r\n%s\r\n" % (path, version, h)).encode()
            else:
                b = json.dumps(body).encode()
                data += ("POST %s HTTP/%s\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: %d\r\n%s\r\n" % (path, version, len(b), h)).encode() + b
        s.sendall(data)

    def exchange(self, requests, closes):
        s = raw_connect(self.mp.port)
        self.send(s, requests)
        f = s.makefile("rb")
        answers = [read_response(f) for _ in requests]
        s.settimeout(2)
        rest = f.read() if closes else None  # b"" once memproxy has closed the connection
        s.close()
        return answers, rest

    def test_every_connection_kind_gets_whole_answers(self):
        chat = "/v1/chat/completions"
        for session in ({}, {"X-Session-Id": "conn-kinds"}):
            for stream in (False, True):
                body = stream_body() if stream else USER_HI
                for version, extra, closes in (("1.1", {}, False),
                                               ("1.1", {"Connection": "close"}, True),
                                               ("1.0", {}, True)):
                    with self.subTest(session=bool(session), stream=stream, version=version,
                                      extra=extra):
                        answers, rest = self.exchange(
                            [(version, chat, body, dict(session, **extra))], closes)
                        status, headers, text = answers[0]
                        self.assertEqual(status, 200)
                        if stream:
                            self.assertEqual(sse_data(text.decode())[-1], "[DONE]")
                            self.assertTrue(chat_text(sse_data(text.decode())).startswith("Hello!"))
                        else:
                            self.assertEqual(json.loads(text)["object"], "chat.completion")
                        if closes:
                            self.assertEqual(rest, b"", "connection left open")

    def test_pipelined_requests_each_answered_in_order(self):
        chat = "/v1/chat/completions"
        requests = [("1.1", chat, USER_HI, {"X-Session-Id": "pipelined"}),
                    ("1.1", "/healthz", None, {}),
                    ("1.1", chat, stream_body(), {}),
                    ("1.1", chat, {"messages": 1}, {}),
                    ("1.1", "/healthz", None, {"Connection": "close"})]
        answers, rest = self.exchange(requests, closes=True)
        self.assertEqual([a[0] for a in answers], [200, 200, 200, 400, 200])
        self.assertEqual(json.loads(answers[0][2])["object"], "chat.completion")
        self.assertEqual(json.loads(answers[1][2]), {"status": "ok"})
        self.assertEqual(sse_data(answers[2][2].decode())[-1], "[DONE]")
        self.assertEqual(json.loads(answers[3][2])["error"]["type"], "invalid_request_error")
        self.assertEqual(rest, b"")


    def sized_request(self, total, session=None):
        """A chat request of exactly total bytes, and the one message's text it carries."""
        h = "X-Session-Id: %s\r\n" % session if session else ""
        head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%sContent-Type: "
                "application/json\r\nContent-Length: %%d\r\n\r\n" % h)
        body = lambda text: json.dumps({"messages": [{"role": "user", "content": text}]})
        make = lambda text: (head % len(body(text))).encode() + body(text).encode()
        n = total - len(make(""))
        while len(make("x" * n)) != total:  # the length's own digits count too
            n += total - len(make("x" * n))
        text = "".join(chr(ord("a") + i % 26) for i in range(n))
        data = make(text)
        self.assertEqual(len(data), total)
        return data, text

    def assert_echoed(self, f, text, what):
        status, _, body = read_response(f)
        self.assertEqual(status, 200, what)
        echoed = json.loads(json.loads(body)["choices"][0]["message"]["content"])
        self.assertEqual(echoed, [{"role": "user", "content": text}], what)

    def test_large_requests_read_whole(self):
        """memproxy reads a request past libevent's 4 KiB a read at once (conn.h): requests of
        exactly 4 KiB, just past it, past its read ahead (16 KiB) and past what one wake-up
        reads ahead (256 KiB), sent back to back in one write, each reach the upstream whole
        and are answered in order, and the request after them is not lost."""
        self.mock.config(echo=True)
        sizes = (4096, 4097, 8192, 20000, 300000)
        made = [self.sized_request(n) for n in sizes]
        s = raw_connect(self.mp.port)
        s.sendall(b"".join(d for d, _ in made) +
                  b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        f = s.makefile("rb")
        for n, (_, text) in zip(sizes, made):
            self.assert_echoed(f, text, n)
        status, _, body = read_response(f)
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        s.close()

    def test_kept_connection_reads_each_next_request(self):
        """On a kept-alive connection memproxy reads the next request itself, ahead of
        libevent (conn.h). Requests sent one at a time after their answers, of every size
        around its reads (small, 4 KiB, past its 16 KiB read, past what one wake-up reads),
        one that arrives in two parts a while apart, two that arrive in one write, and then
        a client that closes its side: each request reaches the upstream whole and is answered
        in order, and memproxy closes the connection at the end."""
        self.mock.config(echo=True)
        s = raw_connect(self.mp.port)
        f = s.makefile("rb")
        for i, n in enumerate((300, 4096, 4097, 8192, 16320, 20000, 300000, 500)):
            data, text = self.sized_request(n, session="kept-%d" % (i % 2))
            s.sendall(data)
            self.assert_echoed(f, text, n)
        data, text = self.sized_request(9000)
        for part in (data[:100], data[100:5000], data[5000:]):
            s.sendall(part)
            time.sleep(0.05)  # each part wakes memproxy on its own
        self.assert_echoed(f, text, "in parts")
        (a, text_a), (b, text_b) = self.sized_request(700), self.sized_request(6000)
        s.sendall(a + b)
        self.assert_echoed(f, text_a, "first of two")
        self.assert_echoed(f, text_b, "second of two")
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        self.assertEqual(f.read(), b"", "connection left open")
        s.close()


class Observability(StackTest):
    def test_healthz_and_metrics(self):
        status, body = self.mp.json("GET", "/healthz")
        self.assertEqual((status, body), (200, {"status": "ok"}))
        self.mp.stream(stream_body())
        self.mp.json("POST", "/v1/chat/completions", USER_HI)
        status, hdrs, text = self.mp.request("GET", "/metrics")
        text = text.decode()
        self.assertEqual(status, 200)
        self.assertIn('memproxy_requests_total{route="chat",status="200"} 2', text)
        self.assertIn("memproxy_upstream_ttft_seconds_count 1", text)
        self.assertIn("memproxy_added_latency_seconds_count 2", text)
        self.assertIn("memproxy_commit_wait_seconds_count 0", text)  # no session: no commit
        self.assertIn("memproxy_session_check_wait_seconds_count 0", text)  # nor a check
        self.assertIn("memproxy_active_streams 0", text)


if __name__ == "__main__":
    unittest.main()
