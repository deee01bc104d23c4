"""Hardening (docs/security.md): input that must be refused with a clear error and leave
memproxy running and its data as it was."""
import json
import unittest

from harness import Memproxy, Mock, USER_HI

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


if __name__ == "__main__":
    unittest.main()
