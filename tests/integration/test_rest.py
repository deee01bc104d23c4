"""The REST API over what memproxy recorded (docs/design.md §8): history in Agora's shape, session
lifecycle, tenant scoping, and bad input that changes nothing."""
import json
import os
import sqlite3
import unittest

from harness import Memproxy, Mock, db_connect

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "agora-custom-request.json")
CONFIG = """
server:
  max_body_size: 4KiB
auth:
  client_keys:
    - {key: client-a-0123456789abcdef, tenant: a}
    - {key: client-b-0123456789abcdef, tenant: b}
  admin_keys:
    - {key: admin-a-0123456789abcdef, tenant: a}
    - {key: admin-b-0123456789abcdef, tenant: b}
"""


class Rest(unittest.TestCase):
    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)
        with open(FIXTURE) as f:
            self.fx = json.load(f)

    def chat(self, body, key="client-a-0123456789abcdef"):
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body,
                                         {"Authorization": "Bearer " + key})
        self.assertEqual(status, 200, out)

    def api(self, method, path, body=None, key="admin-a-0123456789abcdef", raw=None):
        status, hdrs, out = self.mp.request(method, path, body,
                                            {"Authorization": "Bearer " + key}, raw=raw)
        ctype = hdrs.get("content-type", "")
        return status, (json.loads(out) if ctype.startswith("application/json") else out.decode())

    def conversation(self):
        """The Agora fixture's window (turn 4), answered by the mock."""
        self.mock.config(reply="You asked for a joke about cats.")
        self.chat(self.fx)

    def test_history_in_agoras_shape(self):
        self.conversation()
        status, h = self.api("GET", "/v1/sessions/room-42-agent/history")
        self.assertEqual(status, 200, h)
        self.assertEqual(h["agent_id"], "room-42-agent")
        self.assertEqual(h["status"], "RUNNING")
        self.assertIsInstance(h["start_ts"], int)
        contents = h["contents"]
        self.assertEqual(len(contents), 8)  # 7 turns of the window and the reply
        cut = contents[2]
        self.assertEqual(cut["role"], "assistant")
        self.assertEqual(cut["content"], "A cat walks into a")
        self.assertEqual(cut["turn_id"], 2)
        self.assertEqual(cut["metadata"]["interrupted"], True)
        self.assertEqual(cut["metadata"]["interrupt_timestamp"], 1763800106500)
        self.assertEqual(cut["metadata"]["original"],
                         self.fx["messages"][3]["metadata"]["original"])
        self.assertEqual(contents[1]["metadata"], {"source": "asr", "user": "1002"})
        self.assertEqual(contents[5]["metadata"]["source"], "silence")
        self.assertEqual(contents[-1]["metadata"]["source"], "llm")
        self.assertEqual(contents[-1]["content"], "You asked for a joke about cats.")
        # the alias, a limit, the formats
        status, alias = self.api("GET", "/v1/agents/room-42-agent/history")
        self.assertEqual(alias, h)
        status, last2 = self.api("GET", "/v1/sessions/room-42-agent/history?limit=2")
        self.assertEqual(last2["contents"], contents[-2:])
        status, full = self.api("GET", "/v1/sessions/room-42-agent/history?format=full")
        self.assertEqual(full["contents"][-1]["model"], "gpt-4o-mini")
        self.assertIn("usage", full["contents"][-1])
        status, text = self.api("GET", "/v1/sessions/room-42-agent/history?format=text")
        self.assertEqual(status, 200)
        self.assertTrue(text.startswith("ASSISTANT: Hi, what can I do for you?\n\nUSER: Tell me"))
        self.assertTrue(text.endswith("ASSISTANT: You asked for a joke about cats."))

    def test_history_with_tool_calls_is_messages_again(self):
        """A call that used a tool: its history's entries carry OpenAI's tool fields in the
        default format, so they go back to a model as they are (a tool result needs the call
        it answers); format=full as well; a turn without them gets none."""
        call = {"id": "call_7", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}
        self.mock.config(reply="It is sunny in Oslo.")
        self.chat({"model": "m", "session_id": "tools", "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_7", "name": "weather",
             "content": "{\"sky\":\"sunny\"}"}]})
        for fmt in ("", "?format=full"):
            status, h = self.api("GET", "/v1/sessions/tools/history" + fmt)
            self.assertEqual(status, 200, h)
            got = [(m["role"], m.get("tool_calls"), m.get("tool_call_id"), m.get("name"))
                   for m in h["contents"]]
            self.assertEqual(got, [("user", None, None, None), ("assistant", [call], None, None),
                                   ("tool", None, "call_7", "weather"),
                                   ("assistant", None, None, None)])
        status, text = self.api("GET", "/v1/sessions/tools/history?format=text")
        self.assertEqual(text, 'USER: Weather in Oslo?\n\nASSISTANT: [calls weather({"city":'
                               '"Oslo"})]\n\nTOOL: {"sky":"sunny"}\n\nASSISTANT: It is sunny in Oslo.')

    def test_list_get_patch_stop_delete(self):
        for sid in ("s1", "s2", "s3"):
            self.chat({"model": "m", "session_id": sid, "user_id": "u-" + sid,
                       "messages": [{"role": "user", "content": "hi"}]})
        status, page = self.api("GET", "/v1/sessions?limit=2")
        self.assertEqual([s["id"] for s in page["sessions"]], ["s3", "s2"])
        status, page2 = self.api("GET", "/v1/sessions?limit=2&cursor=" + page["next"])
        self.assertEqual([s["id"] for s in page2["sessions"]], ["s1"])
        self.assertIsNone(page2["next"])
        status, by_user = self.api("GET", "/v1/sessions?user_id=u-s2")
        self.assertEqual([s["id"] for s in by_user["sessions"]], ["s2"])

        status, s = self.api("PATCH", "/v1/sessions/s1", {"labels": {"campaign": "spring"}})
        self.assertEqual((status, s["labels"]), (200, {"campaign": "spring"}))
        status, s = self.api("GET", "/v1/sessions/s1")
        self.assertEqual(s["labels"], {"campaign": "spring"})
        self.assertEqual(s["turns"], 2)

        status, s = self.api("POST", "/v1/sessions/s1/stop")
        self.assertEqual((status, s["status"]), (200, "STOPPED"))
        self.assertIsNotNone(s["stopped_ms"])
        status, s = self.api("POST", "/v1/agents/s2/leave")
        self.assertEqual((status, s["status"]), (200, "STOPPED"))
        status, page = self.api("GET", "/v1/sessions?status=RUNNING")
        self.assertEqual([s["id"] for s in page["sessions"]], ["s3"])

        status, d = self.api("DELETE", "/v1/sessions/s3")
        self.assertEqual((status, d), (200, {"id": "s3", "deleted": True}))
        self.assertEqual(self.api("GET", "/v1/sessions/s3")[0], 404)
        con = db_connect(self.mp.db_path)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM messages m JOIN sessions s ON "
                                     "s.sid = m.sid WHERE s.id = 's3'").fetchone()[0], 0)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM messages").fetchone()[0], 4)
        con.close()

    def test_update_applies_from_the_next_request(self):
        self.conversation()
        update = {"properties": {"llm": {"system_messages": [
            {"role": "system", "content": "The caller has just upgraded to premium."}],
            "params": {"max_tokens": 100}}}}
        status, s = self.api("POST", "/v1/agents/room-42-agent/update", update)
        self.assertEqual(status, 200, s)
        self.assertEqual(s["runtime_system"], [
            {"role": "system", "content": "The caller has just upgraded to premium."}])
        self.chat(self.fx)
        sent = json.loads(self.mock.stats()["last_body"])["messages"]
        # as Agora's update does, the new system messages replace the client's own
        self.assertEqual(sent[0], {"role": "system",
                                   "content": "The caller has just upgraded to premium."})
        self.assertFalse(any("friendly voice assistant" in (m.get("content") or "")
                             for m in sent))

    def test_tenants_and_keys(self):
        self.conversation()
        before = self.api("GET", "/v1/sessions/room-42-agent/history")[1]
        for method, path, body in [
                ("GET", "/v1/sessions/room-42-agent", None),
                ("GET", "/v1/sessions/room-42-agent/history", None),
                ("PATCH", "/v1/sessions/room-42-agent", {"labels": {"x": "y"}}),
                ("POST", "/v1/sessions/room-42-agent/update",
                 {"properties": {"llm": {"system_messages": ["hijack"]}}}),
                ("POST", "/v1/sessions/room-42-agent/stop", None),
                ("DELETE", "/v1/sessions/room-42-agent", None)]:
            status, err = self.api(method, path, body, key="admin-b-0123456789abcdef")
            self.assertEqual(status, 404, (method, path))
            self.assertEqual(err["error"]["code"], "not_found")
        self.assertEqual(self.api("GET", "/v1/sessions", key="admin-b-0123456789abcdef")[1]["sessions"], [])
        for key in ("client-a-0123456789abcdef", "nope", ""):
            status, err = self.api("GET", "/v1/sessions", key=key)
            self.assertEqual(status, 401, key)
        self.assertEqual(self.api("GET", "/v1/sessions/room-42-agent/history")[1], before)

    def test_bad_input_changes_nothing(self):
        self.conversation()
        before = self.api("GET", "/v1/sessions/room-42-agent")[1]
        cases = [
            ("GET", "/v1/sessions/nope", None, None, 404),
            ("GET", "/v1/sessions/nope/history", None, None, 404),
            ("POST", "/v1/sessions/nope/stop", None, None, 404),
            ("GET", "/v1/sessions/room-42-agent/history?limit=0", None, None, 400),
            ("GET", "/v1/sessions/room-42-agent/history?format=xml", None, None, 400),
            ("GET", "/v1/sessions?status=DONE", None, None, 400),
            ("GET", "/v1/sessions?cursor=abc", None, None, 400),
            ("POST", "/v1/sessions/room-42-agent/update", None, b"{not json", 400),
            ("POST", "/v1/sessions/room-42-agent/update", {"properties": {}}, None, 400),
            ("POST", "/v1/sessions/room-42-agent/update",
             {"properties": {"llm": {"system_messages": [42]}}}, None, 400),
            ("PATCH", "/v1/sessions/room-42-agent", {"labels": "x"}, None, 400),
            ("PATCH", "/v1/sessions/room-42-agent", {"status": "STOPPED"}, None, 400),
            ("PATCH", "/v1/sessions/room-42-agent", {}, None, 400),
            ("PATCH", "/v1/sessions/room-42-agent", None, b"x" * 5000, 413),
            ("PUT", "/v1/sessions/room-42-agent", {}, None, 405),
            ("GET", "/v1/sessions/room-42-agent/stop", None, None, 405),
            ("GET", "/v1/sessions/room-42-agent/nothing", None, None, 404),
            ("GET", "/v1/sessions/%01bad", None, None, 404),
        ]
        for method, path, body, raw, want in cases:
            status, err = self.api(method, path, body, raw=raw)
            self.assertEqual(status, want, (method, path, err))
            self.assertIn("message", err["error"], (method, path))
        self.assertEqual(self.api("GET", "/v1/sessions/room-42-agent")[1], before)
        status, err = self.api("PATCH", "/v1/sessions/room-42-agent", raw=b'{"labels": {"a": 1,}}')
        self.assertEqual((status, err["error"]["code"]), (400, "invalid_json"))
        self.assertEqual(err["error"]["message"],
                         "the body is not valid JSON (line 1, column 20: string or '}' expected)")
        status, err = self.api("PATCH", "/v1/sessions/room-42-agent", raw=b"[1]")
        self.assertEqual((status, err["error"]["message"]), (400, "the body must be a JSON object"))


if __name__ == "__main__":
    unittest.main()
