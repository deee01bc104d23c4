"""Every voice platform as it really calls (docs/platforms.md): the session and the user come
from each platform's own fields, without an extra header, and its extension fields never reach
the upstream. Bodies are in tests/fixtures, with their source noted there."""
import json
import os
import subprocess
import unittest

from harness import MEMPROXY_BIN, Memproxy, Mock

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
ADMIN = "admin-key-platforms-0123456789"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


class Platforms(unittest.TestCase):
    CONFIG = """
auth:
  admin_keys: [%s]
sessions:
  id_pattern: "conversation: ([A-Za-z0-9_-]+)"
  user_fields: [/metadata/caller]
""" % ADMIN

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(self.CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def recorded(self, body):
        """Send body as the platform does (no memproxy header); the session memproxy named."""
        status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, out)
        sid = hdrs["x-memproxy-session"]
        self.assertNotEqual(sid, "none")
        status, sess = self.mp.json("GET", "/v1/sessions/" + sid,
                                    headers={"Authorization": "Bearer " + ADMIN})
        self.assertEqual(status, 200, sess)
        return sess, json.loads(self.mock.stats()["last_body"])

    def test_vapi_call_and_caller(self):
        body = fixture("vapi-custom-llm-request.json")
        sess, sent = self.recorded(body)
        self.assertEqual(sess["id"], body["call"]["id"])
        self.assertEqual(sess["user_id"], "+15550100123")  # customer.number
        for k in ("call", "customer", "phoneNumber"):
            self.assertNotIn(k, sent)
        self.assertEqual(sent["metadata"], {"clinic": "north"})  # an OpenAI field: kept

    def test_elevenlabs_extra_body(self):
        body = fixture("elevenlabs-custom-llm-request.json")
        sess, sent = self.recorded(body)
        self.assertEqual((sess["id"], sess["user_id"]), ("conv_01jz9q6f7r8s", "traveller-42"))
        self.assertNotIn("elevenlabs_extra_body", sent)

    def test_elevenlabs_phone_call_id_in_the_prompt(self):
        sess, sent = self.recorded(fixture("elevenlabs-phone-request.json"))
        self.assertEqual(sess["id"], "conv_01jzphone77")

    def test_configured_user_field_by_pointer(self):
        body = fixture("vapi-custom-llm-request.json")
        body.pop("customer")
        body["call"].pop("customer")
        body["metadata"] = {"caller": "patient-9"}
        sess, _ = self.recorded(body)
        self.assertEqual(sess["user_id"], "patient-9")

    def test_agora_normal_mode_keeps_what_was_heard(self):
        """Agora's engine in normal mode sends role and content only, the session in
        llm.params (copied to the top level). A reply the caller cut short comes back as the
        shorter text alone, unflagged: stored as heard, with the generated text as original."""
        body = fixture("agora-normal-request.json")
        self.mock.config(reply="Bubbles is a classic, and Finn suits a fast one.")
        sess, sent = self.recorded(body)
        self.assertEqual(sess["id"], "room-7-agent")
        self.assertNotIn("session_id", sent)
        body["messages"] += [{"role": "assistant", "content": "Bubbles is a"},
                             {"role": "user", "content": "Something shorter?"}]
        self.mock.config(reply="Finn.")
        self.recorded(body)
        status, hist = self.mp.json("GET", "/v1/sessions/room-7-agent/history",
                                    headers={"Authorization": "Bearer " + ADMIN})
        self.assertEqual(status, 200, hist)
        got = [(m["role"], m["content"], m["metadata"].get("interrupted"),
                m["metadata"].get("original")) for m in hist["contents"]]
        self.assertEqual(got, [
            ("assistant", "Hello! How can I help?", None, None),
            ("user", "What's a good name for a goldfish?", None, None),
            ("assistant", "Bubbles is a", True,
             "Bubbles is a classic, and Finn suits a fast one."),
            ("user", "Something shorter?", None, None),
            ("assistant", "Finn.", None, None)])

    def test_a_bad_pattern_is_refused_at_start(self):
        out = subprocess.run([MEMPROXY_BIN, "--upstream", "http://127.0.0.1:9/v1",
                              "--check-config", "--config", "/dev/stdin"],
                             input="sessions:\n  id_pattern: 'no group here'\n",
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 2)
        self.assertIn("sessions.id_pattern", out.stderr + out.stdout)


if __name__ == "__main__":
    unittest.main()
