"""How sessions end and what leaves memproxy when they do (docs/design.md §8, §9): the stop-time
webhook dump (signed, in Agora's shape, at least once, one noticeId across restarts), the idle
timeout, Agora's notifications, export/import, and erasing a user. A webhook receiver runs in
this process on 127.0.0.1."""
import hashlib
import hmac
import http.server
import json
import os
import sqlite3
import threading
import time
import unittest

from harness import Memproxy, Mock, free_port, wait_for, db_connect

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "..", "fixtures")
SECRET = "hook-secret-0123456789abcdef"
AGORA_SECRET = "agora-secret-0123456789abcdef"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


class Receiver:
    """A business server's webhook endpoint: records every POST, answers with status."""

    def __init__(self, port=0, status=200):
        self.status = status
        self.got = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.got.append((dict(self.headers), body))
                self.send_response(outer.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d/hook" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def dumps(self):
        with self.lock:
            return list(self.got)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def config(hook_url, extra=""):
    return """
auth:
  client_keys:
    - {key: client-a-0123456789abcdef, tenant: a}
    - {key: client-b-0123456789abcdef, tenant: b}
  admin_keys:
    - {key: admin-a-0123456789abcdef, tenant: a}
    - {key: admin-b-0123456789abcdef, tenant: b}
webhooks:
  - url: %s
    secret: %s
    backoff: 200ms
    max_backoff: 400ms
    timeout: 2s
""" % (hook_url, SECRET) + extra


class Base(unittest.TestCase):
    EXTRA = ""

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.recv = Receiver()
        self.addCleanup(self.recv.stop)
        self.mp = self.start()

    def start(self, db=None, hook_url=None):
        mp = Memproxy(config(hook_url or self.recv.url, self.EXTRA), upstream=self.mock.url,
                      db=db)
        self.addCleanup(lambda: mp.proc.poll() is None and mp.stop())
        return mp

    def chat(self, body, key="client-a-0123456789abcdef"):
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body,
                                         {"Authorization": "Bearer " + key})
        self.assertEqual(status, 200, out)

    def api(self, method, path, body=None, key="admin-a-0123456789abcdef", raw=None, headers=None):
        h = {"Authorization": "Bearer " + key}
        h.update(headers or {})
        status, hdrs, out = self.mp.request(method, path, body, h, raw=raw)
        ctype = hdrs.get("content-type", "")
        return status, (json.loads(out) if ctype.startswith("application/json") else out)

    def voice_call(self):
        """An Agora custom-mode call: the fixture's window, answered, then the next window
        with the reply coming back and a new question."""
        fx = fixture("agora-custom-request.json")
        self.mock.config(reply="You asked for a joke about cats.")
        self.chat(fx)
        fx2 = json.loads(json.dumps(fx))
        fx2["turn_id"] = fx["turn_id"] + 1
        fx2["messages"].append({"role": "assistant", "content": "You asked for a joke about cats.",
                                "turn_id": fx["turn_id"], "timestamp": 1763800140000,
                                "metadata": {"source": "llm"}})
        fx2["messages"].append({"role": "user", "content": "Thanks, bye!",
                                "turn_id": fx2["turn_id"], "timestamp": 1763800150000,
                                "metadata": {"source": "asr"}})
        self.mock.config(reply="Goodbye!")
        self.chat(fx2)
        return fx["session_id"] if "session_id" in fx else "room-42-agent"

    def check_signed(self, headers, body):
        sha256 = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        sha1 = hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
        self.assertEqual(headers.get("Agora-Signature-V2"), sha256)
        self.assertEqual(headers.get("Agora-Signature"), sha1)


class Dump(Base):
    def test_stop_posts_one_signed_dump_equal_to_the_history(self):
        sid = self.voice_call()
        status, history = self.api("GET", "/v1/sessions/%s/history?format=full" % sid)
        self.assertEqual(status, 200)
        voice = [c for c in history["contents"] if c["metadata"].get("interrupted")]
        self.assertEqual(len(voice), 1)  # the cut reply, heard and generated text both kept
        self.assertNotEqual(voice[0]["content"], voice[0]["metadata"]["original"])
        status, s = self.api("POST", "/v1/sessions/%s/stop" % sid)
        self.assertEqual((status, s["status"]), (200, "STOPPED"))
        wait_for(lambda: self.recv.dumps(), what="the dump")
        headers, body = self.recv.dumps()[0]
        self.check_signed(headers, body)
        dump = json.loads(body)
        self.assertEqual(dump["eventType"], 103)
        self.assertEqual(dump["productId"], 17)
        self.assertEqual(dump["sid"], sid)
        self.assertIsInstance(dump["notifyMs"], int)
        p = dump["payload"]
        self.assertEqual(p["agent_id"], sid)
        self.assertEqual(p["start_ts"], history["start_ts"])
        self.assertGreaterEqual(p["stop_ts"], p["start_ts"])
        self.assertEqual(p["user_id"], "1002")
        self.assertEqual(p["contents"], history["contents"])
        # a second stop is no new dump; nothing else arrives
        self.assertEqual(self.api("POST", "/v1/sessions/%s/stop" % sid)[0], 200)
        time.sleep(1.0)
        self.assertEqual(len(self.recv.dumps()), 1)
        status, page = self.api("GET", "/v1/webhooks/deliveries")
        self.assertEqual(status, 200)
        [d] = page["deliveries"]
        self.assertEqual((d["id"], d["status"], d["attempts"], d["last_status"]),
                         (dump["noticeId"], "delivered", 1, 200))
        status, one = self.api("GET", "/v1/webhooks/deliveries/" + d["id"])
        self.assertEqual(one, d)
        # another tenant sees no delivery of this one
        self.assertEqual(self.api("GET", "/v1/webhooks/deliveries", key="admin-b-0123456789abcdef")[1]
                         ["deliveries"], [])
        self.assertEqual(self.api("GET", "/v1/webhooks/deliveries/" + d["id"],
                                  key="admin-b-0123456789abcdef")[0], 404)

    def test_a_turn_after_the_stop_reopens_the_session_and_the_next_stop_dumps_it(self):
        self.mock.config(reply="Sure.")
        first = {"model": "m", "session_id": "reopened",
                 "messages": [{"role": "user", "content": "First question."}]}
        self.chat(first)
        self.assertEqual(self.api("POST", "/v1/sessions/reopened/stop")[0], 200)
        wait_for(lambda: len(self.recv.dumps()) == 1, what="the first dump")
        # the caller goes on with the same session id: the turn is kept and the session runs
        later = dict(first, messages=first["messages"] + [
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "One more thing."}])
        self.chat(later)
        status, s = self.api("GET", "/v1/sessions/reopened")
        self.assertEqual((status, s["status"], s["stopped_ms"]), (200, "RUNNING", None))
        self.assertEqual(self.api("POST", "/v1/sessions/reopened/stop")[1]["status"], "STOPPED")
        wait_for(lambda: len(self.recv.dumps()) == 2, what="the second dump")
        d1, d2 = [json.loads(body) for _, body in self.recv.dumps()]
        status, history = self.api("GET", "/v1/sessions/reopened/history?format=full")
        self.assertEqual([c["content"] for c in d1["payload"]["contents"]],
                         ["First question.", "Sure."])
        self.assertEqual(len(history["contents"]), 4)
        self.assertEqual(d2["payload"]["contents"], history["contents"])
        self.assertNotEqual(d1["noticeId"], d2["noticeId"])

    def test_update_params_reach_the_upstream(self):
        sid = self.voice_call()
        update = fixture("agora-update-request.json")
        update["properties"]["llm"]["params"] = {"max_tokens": 77, "temperature": 0.25,
                                                 "crm_ref": "not-an-openai-field"}
        status, s = self.api("POST", "/v1/agents/%s/update" % sid, update)
        self.assertEqual(status, 200, s)
        self.assertEqual(s["runtime_params"]["max_tokens"], 77)
        self.chat({"model": "m", "session_id": sid, "messages": [{"role": "user",
                                                                  "content": "again"}]})
        sent = json.loads(self.mock.stats()["last_body"])
        self.assertEqual((sent["max_tokens"], sent["temperature"]), (77, 0.25))
        self.assertNotIn("crm_ref", sent)


class Redelivery(Base):
    def test_receiver_down_restart_then_up_one_notice_id(self):
        port = free_port()
        self.mp.stop()
        self.mp = self.start(db=self.mp.db_path, hook_url="http://127.0.0.1:%d/hook" % port)
        sid = self.voice_call()
        self.assertEqual(self.api("POST", "/v1/sessions/%s/stop" % sid)[0], 200)

        def tried_twice():
            ds = self.api("GET", "/v1/webhooks/deliveries")[1]["deliveries"]
            return ds and ds[0]["attempts"] >= 2 and ds
        [d] = wait_for(tried_twice, timeout=10, step=0.1, what="two failed tries")
        self.assertEqual(d["status"], "pending")
        self.assertIsNotNone(d["last_error"])
        db = self.mp.db_path
        self.mp.proc.kill()  # kill -9: the pending dump must be in the database already
        self.mp.proc.wait(5)
        self.mp = self.start(db=db, hook_url="http://127.0.0.1:%d/hook" % port)
        back = Receiver(port=port)
        self.addCleanup(back.stop)
        wait_for(lambda: back.dumps(), timeout=10, step=0.05, what="the dump after the restart")
        time.sleep(1.0)
        notices = {json.loads(b)["noticeId"] for _, b in back.dumps()}
        self.assertEqual(notices, {d["id"]})
        headers, body = back.dumps()[0]
        self.check_signed(headers, body)
        wait_for(lambda: self.api("GET", "/v1/webhooks/deliveries/" + d["id"])[1]["status"]
                 == "delivered", timeout=10, step=0.05, what="delivered")

    def test_failed_delivery_is_kept_and_retryable(self):
        self.recv.status = 500
        self.mp.stop()
        self.EXTRA = ""
        cfg = config(self.recv.url).replace("max_backoff: 400ms",
                                            "max_backoff: 400ms\n    max_attempts: 2")
        self.mp = Memproxy(cfg, upstream=self.mock.url)
        self.addCleanup(lambda: self.mp.proc.poll() is None and self.mp.stop())
        self.chat({"model": "m", "session_id": "s-fail", "messages": [
            {"role": "user", "content": "hi"}]})
        self.assertEqual(self.api("POST", "/v1/sessions/s-fail/stop")[0], 200)
        [d] = wait_for(lambda: [x for x in self.api("GET", "/v1/webhooks/deliveries?status="
                                                    "failed")[1]["deliveries"]],
                       timeout=10, step=0.1, what="a failed delivery")
        self.assertEqual((d["attempts"], d["last_status"]), (2, 500))
        _, _, metrics = self.mp.request("GET", "/metrics")
        self.assertIn(b'memproxy_webhook_tries_total{result="retry"} 1', metrics)
        self.assertIn(b'memproxy_webhook_tries_total{result="failed"} 1', metrics)
        self.assertEqual(len(self.recv.dumps()), 2)
        self.recv.status = 204
        status, r = self.api("POST", "/v1/webhooks/deliveries/%s/retry" % d["id"])
        self.assertEqual(status, 200, r)
        wait_for(lambda: self.api("GET", "/v1/webhooks/deliveries/" + d["id"])[1]["status"]
                 == "delivered", timeout=10, what="delivered after the retry")
        self.assertEqual({json.loads(b)["noticeId"] for _, b in self.recv.dumps()}, {d["id"]})
        # delivered: no more retries; unknown ids and other tenants: not found
        self.assertEqual(self.api("POST", "/v1/webhooks/deliveries/%s/retry" % d["id"])[0], 409)
        self.assertEqual(self.api("POST", "/v1/webhooks/deliveries/nope/retry")[0], 404)
        self.assertEqual(self.api("POST", "/v1/webhooks/deliveries/%s/retry" % d["id"],
                                  key="admin-b-0123456789abcdef")[0], 404)
        for bad in ("status=lost", "limit=0", "cursor=x"):
            self.assertEqual(self.api("GET", "/v1/webhooks/deliveries?" + bad)[0], 400, bad)


class Idle(Base):
    EXTRA = "sessions:\n  idle_timeout: 1s\n"

    def test_idle_session_is_stopped_and_dumped_busy_one_is_not(self):
        self.chat({"model": "m", "session_id": "quiet", "messages": [
            {"role": "user", "content": "hello"}]})
        deadline = time.monotonic() + 3.0
        n = 0
        while time.monotonic() < deadline:  # "busy" keeps talking every 200 ms
            n += 1
            self.chat({"model": "m", "session_id": "busy", "messages": [
                {"role": "user", "content": "turn %d" % n}]})
            time.sleep(0.2)
        wait_for(lambda: self.recv.dumps(), timeout=5, what="the idle dump")
        self.assertEqual(self.api("GET", "/v1/sessions/quiet")[1]["status"], "STOPPED")
        self.assertEqual(self.api("GET", "/v1/sessions/busy")[1]["status"], "RUNNING")
        sids = [json.loads(b)["sid"] for _, b in self.recv.dumps()]
        self.assertEqual(sids, ["quiet"])


class WebhookEntries(unittest.TestCase):
    """Two tenants' webhook entries may share a receiver with their own secrets: each dump is
    signed with the secret of the entry that queued it, and says whose it is."""

    def test_each_tenant_signed_with_its_entry(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        recv = Receiver()
        self.addCleanup(recv.stop)
        secrets = {"a": "secret-of-tenant-a-0123", "b": "secret-of-tenant-b-4567"}
        conf = ("auth:\n  client_keys:\n    - {key: client-a-0123456789abcdef, tenant: a}\n"
                "    - {key: client-b-0123456789abcdef, tenant: b}\n"
                "  admin_keys:\n    - {key: admin-a-0123456789abcdef, tenant: a}\n"
                "    - {key: admin-b-0123456789abcdef, tenant: b}\nwebhooks:\n"
                "  - {url: '%s', secret: %s, tenant: a}\n  - {url: '%s', secret: %s, tenant: b}\n"
                % (recv.url, secrets["a"], recv.url, secrets["b"]))
        mp = Memproxy(conf, upstream=mock.url)
        self.addCleanup(mp.stop)
        for t in ("a", "b"):
            body = {"model": "m", "session_id": "call-" + t,
                    "messages": [{"role": "user", "content": "hi"}]}
            self.assertEqual(mp.request("POST", "/v1/chat/completions", body, {
                "Authorization": "Bearer client-%s-0123456789abcdef" % t})[0], 200)
            self.assertEqual(mp.request("POST", "/v1/sessions/call-%s/stop" % t, None, {
                "Authorization": "Bearer admin-%s-0123456789abcdef" % t})[0], 200)
        wait_for(lambda: len(recv.dumps()) >= 2, timeout=30, what="two dumps")
        for headers, body in recv.dumps():
            dump = json.loads(body)
            t = dump["tenant"]
            self.assertEqual(dump["sid"], "call-" + t)
            want = hmac.new(secrets[t].encode(), body, hashlib.sha256).hexdigest()
            self.assertEqual(headers["Agora-Signature-V2"], want, t)


class Notifications(Base):
    EXTRA = "notifications:\n  agora_secret: %s\n  tenant: a\n  session_field: channel\n" % \
        AGORA_SECRET

    sent = 0

    def notify(self, body, secret=AGORA_SECRET, raw=None, fresh=True):
        """Post a notification; fresh: stamped now with a noticeId of its own, as Agora
        sends each one."""
        if body is not None and fresh:
            Notifications.sent += 1
            body = dict(body, notifyMs=int(time.time() * 1000),
                        noticeId="%s-%d" % (body.get("noticeId", "n"), Notifications.sent))
        data = raw if raw is not None else json.dumps(body).encode()
        headers = {}
        if secret is not None:
            headers["Agora-Signature-V2"] = hmac.new(secret.encode(), data,
                                                     hashlib.sha256).hexdigest()
        status, _, out = self.mp.request("POST", "/v1/notifications/agora", raw=data,
                                         headers=headers)
        return status, json.loads(out)

    def test_signature_checked_and_events_stop_the_session(self):
        sid = self.voice_call()
        note = fixture("agora-notification-agent-left.json")
        for secret in (None, "wrong-secret"):
            status, err = self.notify(note, secret=secret)
            self.assertEqual(status, 401, err)
            self.assertEqual(err["error"]["code"], "invalid_signature")
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[1]["status"], "RUNNING")
        other = dict(note, eventType=101)
        self.assertEqual(self.notify(other)[1]["action"], "ignored")
        unknown = json.loads(json.dumps(note))
        unknown["payload"]["labels"]["session_id"] = "no-such-session"
        unknown["payload"]["name"] = "nor-this"
        self.assertEqual(self.notify(unknown)[1], {"ok": True, "event": 102,
                                                   "session_id": None, "action": "ignored"})
        self.assertEqual(self.notify(None, raw=b"{not json")[0], 400)
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[1]["status"], "RUNNING")
        self.assertEqual(self.recv.dumps(), [])
        status, ack = self.notify(note)
        self.assertEqual((status, ack["action"], ack["session_id"]), (200, "stopped", sid))
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[1]["status"], "STOPPED")
        wait_for(lambda: self.recv.dumps(), what="the dump")
        # matched by the configured field (channel) for event 103
        self.chat({"model": "m", "session_id": "room-7", "messages": [
            {"role": "user", "content": "hi"}]})
        by_channel = {"eventType": 103, "payload": {"channel": "room-7", "labels": {}}}
        self.assertEqual(self.notify(by_channel)[1]["session_id"], "room-7")

    def test_stale_and_repeated_notices_do_nothing(self):
        sid = self.voice_call()
        note = fixture("agora-notification-agent-left.json")
        old = dict(note, notifyMs=int(time.time() * 1000) - 3600 * 1000, noticeId="old-1")
        status, err = self.notify(old, fresh=False)
        self.assertEqual((status, err["error"]["param"]), (400, "notifyMs"), err)
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[1]["status"], "RUNNING")
        now = dict(note, notifyMs=int(time.time() * 1000), noticeId="once-1")
        self.assertEqual(self.notify(now, fresh=False)[1]["action"], "stopped")
        # the session runs again; the same notice replayed does not stop it
        self.chat({"model": "m", "session_id": sid, "messages": [
            {"role": "user", "content": "back again"}]})
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[1]["status"], "RUNNING")
        status, ack = self.notify(now, fresh=False)
        self.assertEqual((status, ack["action"]), (200, "duplicate"))
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[1]["status"], "RUNNING")


class ExportImport(Base):
    def test_round_trip_exactly(self):
        sid = self.voice_call()
        self.api("PATCH", "/v1/sessions/" + sid, {"labels": {"campaign": "spring"}})
        self.api("POST", "/v1/sessions/%s/update" % sid, fixture("agora-update-request.json"))
        status, snap = self.api("GET", "/v1/sessions/%s/export" % sid)
        self.assertEqual(status, 200)
        self.assertEqual(snap["format"], "memproxy.session.v1")
        self.assertEqual(len(snap["turns"]), 10)
        self.assertEqual(self.api("GET", "/v1/sessions/%s/export" % sid, key="admin-b-0123456789abcdef")[0], 404)
        self.assertEqual(self.api("POST", "/v1/sessions/import", snap)[0], 409)
        self.assertEqual(self.api("DELETE", "/v1/sessions/" + sid)[0], 200)
        status, s = self.api("POST", "/v1/sessions/import", snap)
        self.assertEqual((status, s["id"], s["turns"]), (201, sid, 10))
        self.assertEqual(self.api("GET", "/v1/sessions/%s/export" % sid)[1], snap)
        # the restored session goes on recording where it was
        self.chat({"model": "m", "session_id": sid, "turn_id": 6, "messages": [
            {"role": "user", "content": "One more thing.", "turn_id": 6}]})
        turns = self.api("GET", "/v1/sessions/%s/export" % sid)[1]["turns"]
        self.assertEqual([t["seq"] for t in turns], list(range(1, 13)))
        self.assertEqual(turns[:10], snap["turns"])
        # another tenant imports its own copy; the two stay apart
        self.assertEqual(self.api("POST", "/v1/sessions/import", snap, key="admin-b-0123456789abcdef")[0], 201)
        self.assertEqual(self.api("DELETE", "/v1/sessions/" + sid, key="admin-b-0123456789abcdef")[0], 200)
        self.assertEqual(self.api("GET", "/v1/sessions/" + sid)[0], 200)

    def test_bad_snapshots_change_nothing(self):
        sid = self.voice_call()
        snap = self.api("GET", "/v1/sessions/%s/export" % sid)[1]
        snap["session"]["id"] = "restored"

        def broken(f):
            s = json.loads(json.dumps(snap))
            f(s)
            return s
        cases = [
            (None, b"{not json", 400),
            ([1, 2], None, 400),
            (broken(lambda s: s.update(format="v0")), None, 400),
            (broken(lambda s: s["session"].pop("created_ms")), None, 400),
            (broken(lambda s: s["session"].update(status="DONE")), None, 400),
            (broken(lambda s: s["session"].update(id="")), None, 400),
            (broken(lambda s: s["turns"][0].update(seq="1")), None, 400),
            (broken(lambda s: s["turns"][0].update(role="robot")), None, 400),
            (broken(lambda s: s["turns"][0].update(extra=1)), None, 400),
            (broken(lambda s: s["turns"].append(s["turns"][0])), None, 400),
            (broken(lambda s: s["turns"].reverse()), None, 400),
            (None, b"[" * 100 + b"]" * 100, 400),
            (None, b"x" * (5 * 1024 * 1024), 413),
        ]
        for body, raw, want in cases:
            status, err = self.api("POST", "/v1/sessions/import", body, raw=raw)
            self.assertEqual(status, want, (body if raw is None else raw[:20], err))
            self.assertIn("message", err["error"])
        self.assertEqual(self.api("GET", "/v1/sessions/restored")[0], 404)
        con = db_connect(self.mp.db_path)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0], 1)
        con.close()


class Users(Base):
    def test_memory_and_erasure(self):
        for sid, user in (("u1-a", "U"), ("u1-b", "U"), ("v-a", "V")):
            self.chat({"model": "m", "session_id": sid, "user_id": user,
                       "messages": [{"role": "user", "content": "hello from " + user}]})
        mem = {"summary": "U likes cats and calls about billing.",
               "facts": [{"category": "pet", "key": "cat", "value": "Misu", "confidence": 0.9}]}
        status, got = self.api("PUT", "/v1/users/U/memory", mem)
        self.assertEqual(status, 200, got)
        self.assertEqual(got["summary"]["text"], mem["summary"])
        self.assertEqual([(f["key"], f["value"]) for f in got["facts"]], [("cat", "Misu")])
        self.assertEqual(self.api("GET", "/v1/users/U/memory", key="admin-b-0123456789abcdef")[1]["facts"], [])
        # the next request of U's session carries it; V's does not
        self.chat({"model": "m", "session_id": "u1-a", "user_id": "U",
                   "messages": [{"role": "user", "content": "hello from U"},
                                {"role": "assistant", "content": "Hello."},
                                {"role": "user", "content": "again"}]})
        sent = json.dumps(json.loads(self.mock.stats()["last_body"])["messages"])
        self.assertIn("Misu", sent)
        self.chat({"model": "m", "session_id": "v-a", "user_id": "V",
                   "messages": [{"role": "user", "content": "hi"}]})
        self.assertNotIn("Misu", self.mock.stats()["last_body"])
        self.assertEqual(self.api("POST", "/v1/sessions/u1-b/stop")[0], 200)
        wait_for(lambda: self.recv.dumps(), what="the dump")
        for body in ({"summary": 5}, {"facts": [{"category": "x"}]}, {"other": 1},
                     {"facts": [{"category": "a", "key": "b", "value": "c", "confidence": 2}]}):
            self.assertEqual(self.api("PUT", "/v1/users/U/memory", body)[0], 400, body)
        # another tenant's erasure touches nothing of tenant a
        self.assertEqual(self.api("DELETE", "/v1/users/U", key="admin-b-0123456789abcdef")[0], 200)
        self.assertEqual(self.api("GET", "/v1/sessions?user_id=U")[1]["sessions"].__len__(), 2)
        status, d = self.api("DELETE", "/v1/users/U")
        self.assertEqual((status, d), (200, {"user_id": "U", "deleted": True}))
        con = db_connect(self.mp.db_path)
        q = lambda sql: con.execute(sql).fetchone()[0]
        self.assertEqual(q("SELECT COUNT(*) FROM sessions WHERE user_id = 'U'"), 0)
        self.assertEqual(q("SELECT COUNT(*) FROM messages m JOIN sessions s USING (sid) "
                           "WHERE s.user_id = 'U'"), 0)
        self.assertEqual(q("SELECT COUNT(*) FROM user_summaries WHERE user_id = 'U'"), 0)
        self.assertEqual(q("SELECT COUNT(*) FROM user_facts WHERE user_id = 'U'"), 0)
        self.assertEqual(q("SELECT COUNT(*) FROM webhook_outbox WHERE user_id = 'U'"), 0)
        self.assertEqual(q("SELECT COUNT(*) FROM sessions WHERE user_id = 'V'"), 1)
        # V's two turns, answered (PostgreSQL deletes an erased user's turns a chunk at a time
        # right after the erasure's commit: docs/deploy.md)
        wait_for(lambda: q("SELECT COUNT(*) FROM messages") == 4, what="only V's turns left")
        con.close()
        self.assertEqual(self.api("GET", "/v1/users/U/memory")[1],
                         {"user_id": "U", "summary": None, "facts": []})
        # U comes back: a fresh session, nothing injected
        self.chat({"model": "m", "session_id": "u1-a", "user_id": "U",
                   "messages": [{"role": "user", "content": "I'm back"}]})
        self.assertNotIn("Misu", self.mock.stats()["last_body"])
        self.assertEqual(self.api("GET", "/v1/sessions/u1-a")[1]["turns"], 2)
        for method, path in (("GET", "/v1/users/U"), ("POST", "/v1/users/U/memory"),
                             ("GET", "/v1/users/%01/memory"), ("GET", "/v1/users/U/other")):
            status, err = self.api(method, path)
            self.assertIn(status, (404, 405), (method, path))
            self.assertIn("message", err["error"])


if __name__ == "__main__":
    unittest.main()
