"""Recording: every turn that passes through memproxy is stored once, with its voice fields,
and survives a crash (docs/design.md §3, §5, §6)."""
import copy
import http.client
import json
import os
import signal
import sqlite3
import threading
import unittest

from harness import (BACKEND, USER_HI, Memproxy, Mock, StackTest, chat_text, raw_connect, raw_read_until,
                     raw_request, sse_data, wait_for, db_connect)

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "agora-custom-request.json")


def db_rows(path, session, tenant="default"):
    """The session's stored messages in seq order, as dicts."""
    con = db_connect(path, readonly=True)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute(
        "SELECT m.* FROM messages m JOIN sessions s ON s.sid = m.sid "
        "WHERE s.id = ? AND s.tenant = ? ORDER BY m.seq", (session, tenant))]
    con.close()
    return rows


def db_session(path, session, tenant="default"):
    con = db_connect(path, readonly=True)
    con.row_factory = sqlite3.Row
    row = con.execute("SELECT * FROM sessions WHERE id = ? AND tenant = ?",
                      (session, tenant)).fetchone()
    con.close()
    return dict(row) if row else None


def summary(rows):
    return [(r["turn_id"], r["role"], r["source"], r["content"]) for r in rows]


class AgoraConversation(StackTest):
    """A voice conversation in Agora's custom mode, sent as growing windows: greeting, a
    question, an interrupted answer, a silence reminder, a follow-up."""

    def setUp(self):
        super().setUp()
        with open(FIXTURE) as f:
            self.fx = json.load(f)
        m = self.fx["messages"]
        self.sys, self.greet, self.u2, self.a2_heard, self.u3, self.a3, self.silence, self.u4 = m
        self.joke = self.a2_heard["metadata"]["original"]
        self.answer4 = "You asked me for a joke about cats."

    def body(self, turn_id, messages):
        b = copy.deepcopy({k: v for k, v in self.fx.items() if k != "messages"})
        b["turn_id"] = turn_id
        b["messages"] = copy.deepcopy(messages)
        return b

    def turn(self, turn_id, messages, reply):
        self.mock.config(reply=reply)
        status, hdrs, out = self.mp.request("POST", "/v1/chat/completions",
                                            self.body(turn_id, messages))
        self.assertEqual(status, 200, out)
        self.assertEqual(hdrs["x-memproxy-session"], "room-42-agent")
        text = chat_text(sse_data(out.decode()))
        self.assertEqual(text, reply)

    def test_every_message_stored_once_with_its_voice_fields(self):
        a4 = {"role": "assistant", "content": self.answer4, "turn_id": 4,
              "timestamp": 1763800126000, "metadata": {"source": "llm"}}
        u5 = {"role": "user", "content": "Thanks, that's all.", "turn_id": 5,
              "timestamp": 1763800130000, "metadata": {"source": "asr", "user": "1002"}}
        self.turn(2, [self.sys, self.greet, self.u2], self.joke)
        # the caller cut the joke short: it comes back as heard
        self.turn(3, [self.sys, self.greet, self.u2, self.a2_heard, self.u3], self.a3["content"])
        # the platform said the silence reminder itself; the fixture is this window
        self.turn(4, self.fx["messages"], self.answer4)
        window5 = self.fx["messages"] + [a4, u5]
        self.turn(5, window5, "Bye!")
        self.turn(5, window5, "Goodbye!")  # a retry: its reply replaces the first
        a5 = {"role": "assistant", "content": "Goodbye!", "turn_id": 5,
              "timestamp": 1763800131000, "metadata": {"source": "llm"}}
        u6 = {"role": "user", "content": "Wait, one more thing.", "turn_id": 6,
              "timestamp": 1763800135000, "metadata": {"source": "asr", "user": "1002"}}
        # a window that slid past the greeting and the first exchange deletes nothing
        self.turn(6, [self.sys] + window5[4:] + [a5, u6], "Yes?")

        rows = db_rows(self.mp.db_path, "room-42-agent")
        self.assertEqual(summary(rows), [
            (1, "assistant", "greeting", "Hi, what can I do for you?"),
            (2, "user", "asr", "Tell me a joke about cats."),
            (2, "assistant", "llm", "A cat walks into a"),
            (3, "user", "asr", "Actually, what's the weather like in Oslo?"),
            (3, "assistant", "llm", self.a3["content"]),
            (3, "assistant", "silence", "Are you still there?"),
            (4, "user", "asr", "Yes. Remind me what I asked first?"),
            (4, "assistant", "llm", self.answer4),
            (5, "user", "asr", "Thanks, that's all."),
            (5, "assistant", "llm", "Goodbye!"),
            (6, "user", "asr", "Wait, one more thing."),
            (6, "assistant", "llm", "Yes?"),
        ])
        self.assertEqual([r["seq"] for r in rows], list(range(1, 13)))
        by = {(r["turn_id"], r["role"], r["turn_idx"]): r for r in rows}
        cut = by[(2, "assistant", 0)]
        self.assertEqual(cut["interrupted"], 1)
        self.assertEqual(cut["original"], self.joke)  # generated
        self.assertEqual(cut["content"], "A cat walks into a")  # heard
        self.assertEqual(cut["interrupt_ms"], 1763800106500)
        self.assertEqual(cut["model"], "gpt-4o-mini")
        self.assertEqual(by[(3, "assistant", 1)]["source"], "silence")
        self.assertEqual(by[(3, "assistant", 1)]["interrupted"], 0)
        user = by[(2, "user", 0)]
        self.assertEqual(user["timestamp_ms"], 1763800104000)
        self.assertEqual(json.loads(user["metadata"]), {"user": "1002"})
        self.assertEqual(user["importance"], 0.5)  # seed 004: user and assistant 0.5
        reply = by[(4, "assistant", 0)]
        self.assertEqual(reply["finish_reason"], "stop")
        self.assertGreater(json.loads(reply["usage"])["total_tokens"], 0)
        self.assertGreater(reply["latency_us"], 0)
        self.assertGreaterEqual(reply["latency_us"], reply["ttft_us"])
        sess = db_session(self.mp.db_path, "room-42-agent")
        self.assertEqual(sess["user_id"], "1002")
        self.assertEqual(sess["profile"], "default")
        self.assertEqual(json.loads(sess["system_messages"]),
                         [{"role": "system", "content": self.sys["content"]}])
        # routing fields never reach the upstream; the platform's others are issue 4's
        sent = json.loads(self.mock.stats()["last_body"])
        for k in ("session_id", "user_uid"):
            self.assertNotIn(k, sent)
        # what the store did shows in /metrics: 6 requests' writes (the retry's window brings
        # nothing new: no batch) and 6 replies, none failed; one session in memory
        text = self.mp.request("GET", "/metrics")[2].decode()
        self.assertIn('memproxy_store_writes_total{result="ok"} 11', text)
        self.assertIn('memproxy_store_writes_total{result="failed"} 0', text)
        self.assertIn("memproxy_memory_sessions 1", text)
        self.assertIn("memproxy_memory_turns 12", text)
        # each of the 6 responses' ends waited for its commit, and that wait is measured
        self.assertIn("memproxy_commit_wait_seconds_count 6", text)
        self.assertIn('memproxy_commit_wait_seconds_bucket{le="+Inf"} 6', text)
        # and each of the writer's transactions took a measured time (none failed here)
        values = dict(line.rsplit(" ", 1) for line in text.splitlines()
                      if line and not line.startswith("#"))
        tx = int(values["memproxy_store_transactions_total"])
        self.assertGreater(tx, 0)
        self.assertEqual(int(values["memproxy_store_transaction_seconds_count"]), tx)
        self.assertEqual(int(values['memproxy_store_transaction_seconds_bucket{le="+Inf"}']), tx)
        self.assertGreater(float(values["memproxy_store_transaction_seconds_sum"]), 0)
        # the WAL's writebacks (storage.wal_flush_after) are counted: on SQLite one at most
        # (a new database's schema is ~165 KiB of its WAL, the six requests' rows about as
        # much again: past the first 256 KiB once); PostgreSQL has no WAL of memproxy's
        flushes = int(values["memproxy_store_wal_flushes_total"])
        self.assertLessEqual(flushes, 1 if BACKEND == "sqlite" else 0)


class Sessions(StackTest):
    """Which session and user a request belongs to, and what is not recorded."""
    CONFIG = "sessions:\n  id_fields: [channel]\n"

    def chat(self, body, headers=None, path="/v1/chat/completions"):
        status, hdrs, out = self.mp.request("POST", path, body, headers)
        self.assertEqual(status, 200, out)
        return hdrs

    def test_every_session_source(self):
        cases = [
            ("hdr", {"X-Session-Id": "hdr", "X-User-Id": "u-h"}, {}, "/v1/chat/completions"),
            ("q s", {}, {}, "/v1/chat/completions?a=1&session_id=q+s"),
            ("body", {}, {"session_id": "body", "user_id": "u-b"}, "/v1/chat/completions"),
            ("42", {}, {"session_id": 42}, "/v1/chat/completions"),
            ("vapi", {}, {"call": {"id": "vapi"}, "user": "u-o"}, "/v1/chat/completions"),
            ("chan", {}, {"channel": "chan", "user_uid": 7}, "/v1/chat/completions"),
        ]
        for sid, headers, extra, path in cases:
            body = dict(USER_HI, **extra)
            self.assertEqual(self.chat(body, headers, path)["x-memproxy-session"], sid)
            self.assertEqual(len(db_rows(self.mp.db_path, sid)), 2, sid)
            sent = json.loads(self.mock.stats()["last_body"])
            for k in ("session_id", "user_id", "user_uid", "channel", "call"):
                self.assertNotIn(k, sent, sid)
        self.assertEqual(db_session(self.mp.db_path, "hdr")["user_id"], "u-h")
        self.assertEqual(db_session(self.mp.db_path, "body")["user_id"], "u-b")
        self.assertEqual(db_session(self.mp.db_path, "vapi")["user_id"], "u-o")
        self.assertEqual(db_session(self.mp.db_path, "chan")["user_id"], "7")
        # OpenAI's own "user" field still reaches the upstream
        self.assertEqual(json.loads(self.mock.stats()["last_body"]).get("user_uid"), None)

    def test_header_wins_over_body(self):
        self.chat(dict(USER_HI, session_id="body"), {"X-Session-Id": "hdr"})
        self.assertEqual(len(db_rows(self.mp.db_path, "hdr")), 2)
        self.assertIsNone(db_session(self.mp.db_path, "body"))

    def test_no_session_is_forwarded_and_not_recorded(self):
        hdrs = self.chat(USER_HI)
        self.assertEqual(hdrs["x-memproxy-session"], "none")
        con = db_connect(self.mp.db_path)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM messages").fetchone()[0], 0)
        con.close()

    def test_bad_session_ids_are_400_and_store_nothing(self):
        for extra, headers in [({"session_id": {"a": 1}}, {}), ({"session_id": ""}, {}),
                               ({"session_id": "x" * 300}, {}), ({"session_id": 1.5}, {}),
                               ({}, {"X-Session-Id": "a\x01b"}), ({"user_id": [1]}, {})]:
            body = dict(USER_HI, **extra)
            if "user_id" in extra:
                body["session_id"] = "ok-but-bad-user"
            try:
                status, _, out = self.mp.request("POST", "/v1/chat/completions", body, headers)
            except ValueError:  # http.client refuses a control character itself
                continue
            self.assertEqual(status, 400, (extra, headers))
            self.assertEqual(json.loads(out)["error"]["type"], "invalid_request_error")
        con = db_connect(self.mp.db_path)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0], 0)
        con.close()

    def test_normal_mode_windows_and_replays(self):
        """Without turn ids (an OpenAI SDK client resending its history) the window is
        aligned with what is stored; memproxy numbers the turns."""
        msgs = [{"role": "system", "content": "Be brief."}]
        for i in range(4):
            msgs.append({"role": "user", "content": "question %d" % i})
            self.mock.config(reply="answer %d" % i)
            body = {"model": "m", "stream": i % 2 == 0, "messages": msgs}
            self.chat(body, {"X-Session-Id": "n"})
            if i == 1:
                self.chat(body, {"X-Session-Id": "n"})  # a retry of the same request
            msgs.append({"role": "assistant", "content": "answer %d" % i})
        rows = db_rows(self.mp.db_path, "n")
        self.assertEqual([(r["turn_id"], r["role"], r["content"]) for r in rows],
                         [(t, role, "%s %d" % ("question" if role == "user" else "answer", t - 1))
                          for t in range(1, 5) for role in ("user", "assistant")])
        self.assertEqual(rows[1]["source"], "llm")
        self.assertIsNone(rows[0]["source"])

    def test_tenants_do_not_share_sessions(self):
        mp = Memproxy("auth:\n  client_keys:\n    - {key: ka-0123456789abcdef, tenant: a}\n"
                      "    - {key: kb-0123456789abcdef, tenant: b}\n", upstream=self.mock.url)
        self.addCleanup(mp.stop)
        for key in ("ka", "kb"):
            self.mock.config(reply="for " + key)
            st, _, _ = mp.request("POST", "/v1/chat/completions", dict(USER_HI, session_id="s"),
                                  {"Authorization": "Bearer " + key + "-0123456789abcdef"})
            self.assertEqual(st, 200)
        self.assertEqual(db_rows(mp.db_path, "s", "a")[1]["content"], "for ka")
        self.assertEqual(db_rows(mp.db_path, "s", "b")[1]["content"], "for kb")

    def test_images_dropped_and_counted(self):
        body = {"model": "m", "session_id": "img", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
        self.chat(body)
        row = db_rows(self.mp.db_path, "img")[0]
        self.assertEqual(row["content"], "what is this?")
        self.assertEqual(json.loads(row["metadata"]).get("dropped_parts"), 1)


class LongTurns(StackTest):
    """A turn with more messages than the working set keeps (memory.session_turns): a client
    that names the same turn in every request (a top-level turn_id it never moves on), and a
    reply after many messages of its turn. Each new message is stored once, under the next
    index of its turn and role. Those indices were counted from the working set: past its
    size an index was one the turn had stored already, and the insert was dropped as a
    repeat — the questions and replies of every request after the 5th here were lost."""
    CONFIG = ("memory: {session_turns: 8}\n"
              "auth:\n  admin_keys:\n    - {key: admin-0123456789abcdef, tenant: default}\n")
    SYSTEM = {"role": "system", "content": "You are a friendly voice assistant."}

    def history(self, session):
        status, _, out = self.mp.request("GET", "/v1/sessions/%s/history" % session,
                                         headers={"Authorization": "Bearer admin-0123456789abcdef"})
        self.assertEqual(status, 200, out)
        return [(t["turn_id"], t["role"], t["content"]) for t in json.loads(out)["contents"]]

    def ask(self, session, body, reply):
        self.mock.config(reply=reply)
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body,
                                         {"X-Session-Id": session})
        self.assertEqual(status, 200, out)

    def test_one_turn_id_for_every_request(self):
        for i in range(12):
            self.ask("same-turn", {"model": "m", "turn_id": 7, "messages": [
                self.SYSTEM, {"role": "user", "content": "question %d" % i}]}, "answer %d" % i)
        want = []
        for i in range(12):
            want += [(7, "user", "question %d" % i), (7, "assistant", "answer %d" % i)]
        self.assertEqual(self.history("same-turn"), want)

    def test_more_prompts_in_a_turn_than_the_working_set_holds(self):
        """A window without turn ids: the platform's prompts after the last question join its
        turn (memproxy numbers the turns): ten of them, the reply, two more prompts in the
        next window and its reply, then a question."""
        prompts = [{"role": "assistant", "content": "Are you still there? (%d)" % k}
                   for k in range(12)]
        self.ask("prompts", {"model": "m", "messages": [
            self.SYSTEM, {"role": "user", "content": "hello"}]}, "hi there")
        window = [self.SYSTEM, {"role": "user", "content": "hello"},
                  {"role": "assistant", "content": "hi there"}] + prompts[:10]
        self.ask("prompts", {"model": "m", "messages": window}, "goodbye")
        window += [{"role": "assistant", "content": "goodbye"}] + prompts[10:]
        self.ask("prompts", {"model": "m", "messages": window}, "still here")
        self.ask("prompts", {"model": "m", "messages": window + [
            {"role": "assistant", "content": "still here"},
            {"role": "user", "content": "wait"}]}, "yes?")
        said = [p["content"] for p in prompts]
        want = [(1, "user", "hello")] + [(1, "assistant", a) for a in (
            ["hi there"] + said[:10] + ["goodbye"] + said[10:] + ["still here"])]
        want += [(2, "user", "wait"), (2, "assistant", "yes?")]
        self.assertEqual(self.history("prompts"), want)

    def test_a_turn_id_window_from_a_turn_the_working_set_holds_in_part(self):
        """Agora's turn ids: turn 1 holds a question, its reply, ten prompts and a second
        reply, more than the working set keeps. The next window begins in turn 1 with its last
        prompt and the reply cut short, in the platform's own words: that message is the
        turn's last, the reply's row, not the row as far from the start of what the working
        set holds (a prompt's, which it made an interrupted reply)."""
        def msg(role, content, turn):
            return {"role": role, "content": content, "turn_id": turn}
        prompts = [msg("assistant", "Are you still there? (%d)" % k, 1) for k in range(10)]
        self.ask("ids", {"model": "m", "turn_id": 1, "messages": [msg("user", "hello", 1)]},
                 "hi there")
        self.ask("ids", {"model": "m", "turn_id": 1, "messages": [
            msg("user", "hello", 1), msg("assistant", "hi there", 1)] + prompts},
                 "goodbye for now")
        self.ask("ids", {"model": "m", "turn_id": 2, "messages": [
            prompts[-1], dict(msg("assistant", "bye", 1), metadata={
                "interrupted": True, "original": "goodbye for now"}),
            msg("user", "wait", 2)]}, "yes?")
        said = [p["content"] for p in prompts]
        want = [(1, "user", "hello")] + [(1, "assistant", a) for a in (
            ["hi there"] + said + ["bye"])]
        want += [(2, "user", "wait"), (2, "assistant", "yes?")]
        self.assertEqual(self.history("ids"), want)


class RequireSession(StackTest):
    CONFIG = "sessions:\n  require: true\n"

    def test_no_session_is_400(self):
        status, _, out = self.mp.request("POST", "/v1/chat/completions", USER_HI)
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(out)["error"]["param"], "session_id")
        status, _, _ = self.mp.request("POST", "/v1/chat/completions",
                                       dict(USER_HI, session_id="s"))
        self.assertEqual(status, 200)


class HangUp(StackTest):
    """A caller who barges in: the reply is stored as far as it was generated."""
    MOCK_ARGS = ("--token-delay-ms", "20")

    def test_hang_up_mid_stream_is_an_interrupted_turn(self):
        self.mock.config(reply=" ".join("w%d" % i for i in range(200)))
        s = raw_connect(self.mp.port)
        raw_request(s, "/v1/chat/completions",
                    dict(USER_HI, stream=True, session_id="barge"))
        raw_read_until(s, lambda got: got.count(b"data: ") >= 6)
        s.close()
        rows = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(
            db_rows(self.mp.db_path, "barge")), what="the interrupted reply")
        reply = rows[1]
        self.assertEqual(reply["interrupted"], 1)
        self.assertEqual(reply["finish_reason"], "client_disconnected")
        self.assertEqual(reply["original"], reply["content"])
        self.assertTrue(reply["content"].startswith("w0 w1"))
        self.assertLess(len(reply["content"].split()), 200)
        self.assertIsNotNone(reply["interrupt_ms"])


class BargeInReadFirst(StackTest):
    """A caller barges in while a reply streams, and the platform's next request (the reply
    as heard, flagged, and the new question) is read before the first stream's hang-up, as
    when it comes on another connection: the heard part, stored first from that window, and
    the reply recorded at the hang-up are one row (heard as content, generated as original),
    of the turn the reply answers, before the next question's."""
    MOCK_ARGS = ("--token-delay-ms", "20")

    def test_the_reply_takes_the_place_of_its_heard_part(self):
        barge_in_read_first(self, self.mock, self.mp, self.mp)

    def test_the_heard_part_as_spoken(self):
        """The platform sends back its text-to-speech's words (base/spoken.h)."""
        barge_in_read_first(self, self.mock, self.mp, self.mp, reply=SPOKEN_REPLY)

    def test_nothing_heard(self):
        """The caller barged in before the first word: the platform sends the reply back
        empty."""
        barge_in_read_first(self, self.mock, self.mp, self.mp, heard="")

    def test_an_audio_reply_by_reference(self):
        audio_by_reference_read_first(self, self.mock, self.mp, self.mp)

    def test_the_reply_keeps_its_thinking(self):
        """The row is the reply's: its metadata (here a reasoning model's thinking) too."""
        barge_in_keeps_thinking(self, self.mock, self.mp, self.mp)


class UpstreamStreamsAnyway(StackTest):
    """An upstream that ignores "stream": false and answers with an event stream: the client
    gets the bytes as they came, and the reply is recorded from the events (it was recorded
    empty)."""

    def test_the_reply_is_recorded_from_its_events(self):
        self.mock.config(always_stream=True, reply="Here it is, in pieces.")
        status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", {
            "model": "m", "messages": [{"role": "user", "content": "q1"}]},
            {"X-Session-Id": "streamed"})
        self.assertEqual(status, 200, out)
        self.assertTrue(hdrs["content-type"].startswith("text/event-stream"))
        self.assertIn(b"data: [DONE]", out)
        rows = db_rows(self.mp.db_path, "streamed")
        self.assertEqual([(r["role"], r["content"], r["finish_reason"]) for r in rows], [
            ("user", "q1", None), ("assistant", "Here it is, in pieces.", "stop")])


class Refusal(StackTest):
    """A model's refusal (OpenAI's structured outputs: content null, the text in refusal) goes
    to the client as it came and is recorded apart, as the reply's metadata.refusal: it is
    what the model said, though a voice platform speaks content only, and the reply's
    content (what could be heard) stays empty."""
    CONFIG = "auth:\n  admin_keys:\n    - {key: admin-0123456789abcdef, tenant: default}\n"

    def history(self, session):
        status, _, out = self.mp.request("GET", "/v1/sessions/%s/history" % session,
                                         headers={"Authorization": "Bearer admin-0123456789abcdef"})
        self.assertEqual(status, 200, out)
        return json.loads(out)["contents"]

    def test_the_refusal_is_kept_apart_from_what_was_said(self):
        self.mock.config(refusal=True, reply="I can't help with that request.")
        for stream in (False, True):
            session = "refused-%d" % stream
            status, _, out = self.mp.request("POST", "/v1/chat/completions", {
                "model": "m", "stream": stream,
                "messages": [{"role": "user", "content": "Tell me a secret."}]},
                {"X-Session-Id": session})
            self.assertEqual(status, 200, out)
            if stream:
                chunks = [json.loads(d) for d in sse_data(out.decode()) if d != "[DONE]"]
                said = "".join(c["choices"][0]["delta"].get("refusal") or ""
                               for c in chunks if c.get("choices"))
            else:
                said = json.loads(out)["choices"][0]["message"]["refusal"]
            self.assertEqual(said, "I can't help with that request.")
            reply = self.history(session)[-1]
            self.assertEqual((reply["role"], reply["content"]), ("assistant", ""), stream)
            self.assertEqual(reply["metadata"].get("refusal"), "I can't help with that request.",
                             stream)
        # a retried request's reply takes the refused one's place, refusal and all
        self.mock.config(refusal=False, reply="Here is what I can say.")
        status, _, out = self.mp.request("POST", "/v1/chat/completions", {
            "model": "m", "messages": [{"role": "user", "content": "Tell me a secret."}]},
            {"X-Session-Id": "refused-0"})
        self.assertEqual(status, 200, out)
        contents = self.history("refused-0")
        self.assertEqual([(c["role"], c["content"], "refusal" in c["metadata"]) for c in contents],
                         [("user", "Tell me a secret.", False),
                          ("assistant", "Here is what I can say.", False)])

    def test_the_refused_reply_coming_back_is_the_same_row(self):
        """An SDK client sends the refused message back as it got it (content null, the
        refusal): that is the reply recorded, not a reply heard as nothing (interrupted)."""
        self.mock.config(refusal=True, reply="I can't help with that.")
        msgs = [{"role": "user", "content": "Secret?"}]
        status, _, out = self.mp.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": msgs}, {"X-Session-Id": "back"})
        self.assertEqual(status, 200, out)
        self.mock.config(refusal=False, reply="The weather is fine.")
        msgs += [json.loads(out)["choices"][0]["message"], {"role": "user", "content": "Weather?"}]
        status, _, out = self.mp.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": msgs}, {"X-Session-Id": "back"})
        self.assertEqual(status, 200, out)
        self.assertEqual([(c["turn_id"], c["role"], c["content"], c["metadata"].get("refusal"),
                           c["metadata"].get("interrupted", False)) for c in self.history("back")],
                         [(1, "user", "Secret?", None, False),
                          (1, "assistant", "", "I can't help with that.", False),
                          (2, "user", "Weather?", None, False),
                          (2, "assistant", "The weather is fine.", None, False)])


class Reasoning(StackTest):
    """A reasoning model's thinking (DeepSeek's and vLLM's delta.reasoning_content, before the
    reply's content) goes to the client as it came and is recorded apart, as the reply's
    metadata.reasoning: the caller never hears it, so the content is the reply alone."""
    CONFIG = Refusal.CONFIG
    history = Refusal.history
    THOUGHT = "The caller greets me. I greet back, briefly."

    def test_the_thinking_is_kept_apart_from_what_was_said(self):
        self.mock.config(reasoning=self.THOUGHT, reply="Hello there.")
        for stream in (False, True):
            session = "think-%d" % stream
            status, _, out = self.mp.request("POST", "/v1/chat/completions", {
                "model": "m", "stream": stream,
                "messages": [{"role": "user", "content": "Hi!"}]}, {"X-Session-Id": session})
            self.assertEqual(status, 200, out)
            if stream:
                deltas = [json.loads(d)["choices"][0]["delta"] for d in sse_data(out.decode())
                          if d != "[DONE]" and json.loads(d).get("choices")]
                thought = "".join(d.get("reasoning_content") or "" for d in deltas)
            else:
                thought = json.loads(out)["choices"][0]["message"]["reasoning_content"]
            self.assertEqual(thought, self.THOUGHT)  # the client gets it as it came
            reply = self.history(session)[-1]
            self.assertEqual((reply["role"], reply["content"]), ("assistant", "Hello there."))
            self.assertEqual(reply["metadata"].get("reasoning"), self.THOUGHT, stream)

    def test_the_first_token_is_the_first_word(self):
        """A streamed reply's TTFT is the time to its first word, not to its thinking: the
        caller hears nothing before the word (the mock thinks for 300 ms here)."""
        self.mock.config(reasoning=self.THOUGHT, reply="Hello there.", token_delay_ms=300)
        try:
            status, _, out = self.mp.request("POST", "/v1/chat/completions", {
                "model": "m", "stream": True,
                "messages": [{"role": "user", "content": "Hi!"}]}, {"X-Session-Id": "ttft"})
        finally:
            self.mock.config(reasoning=None, token_delay_ms=0)
        self.assertEqual(status, 200, out)
        reply = db_rows(self.mp.db_path, "ttft")[-1]
        self.assertGreaterEqual(reply["ttft_us"], 300000, reply)
        self.assertGreaterEqual(reply["latency_us"], reply["ttft_us"], reply)
        self.assertIn("ttft_ms=", self.mp.output())
        line = [l for l in self.mp.output().splitlines() if "session=ttft" in l][-1]
        self.assertGreaterEqual(float(line.split("ttft_ms=")[1].split()[0]), 300.0, line)

    def test_the_reply_coming_back_with_its_thinking_is_the_same_row(self):
        """A client that sends the message back as it got it (reasoning_content and all):
        that is the reply recorded, one row, its thinking kept."""
        self.mock.config(reasoning=self.THOUGHT, reply="Hello there.")
        msgs = [{"role": "user", "content": "Hi!"}]
        status, _, out = self.mp.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": msgs}, {"X-Session-Id": "back"})
        self.assertEqual(status, 200, out)
        self.mock.config(reasoning=None, reply="Fine, thanks.")
        msgs += [json.loads(out)["choices"][0]["message"], {"role": "user", "content": "How are you?"}]
        status, _, out = self.mp.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": msgs}, {"X-Session-Id": "back"})
        self.assertEqual(status, 200, out)
        self.assertEqual([(c["role"], c["content"], c["metadata"].get("reasoning"),
                           c["metadata"].get("interrupted", False)) for c in self.history("back")],
                         [("user", "Hi!", None, False),
                          ("assistant", "Hello there.", self.THOUGHT, False),
                          ("user", "How are you?", None, False),
                          ("assistant", "Fine, thanks.", None, False)])


class Audio(StackTest):
    """An audio model's reply (gpt-4o-audio's modalities: content null, the words in the
    audio's transcript) is recorded with its transcript as the content, what the caller
    heard, and the audio's id in metadata.audio (not the audio itself). An OpenAI client sends
    it back by reference, {role: assistant, audio: {id}}: that is the reply's own row, heard
    whole, not a reply heard as nothing nor a second one."""
    CONFIG = Refusal.CONFIG
    history = Refusal.history

    def ask(self, session, stream, msgs):
        status, _, out = self.mp.request("POST", "/v1/chat/completions", {
            "model": "m", "stream": stream, "modalities": ["text", "audio"],
            "audio": {"voice": "alloy", "format": "pcm16"}, "messages": msgs},
            {"X-Session-Id": session})
        self.assertEqual(status, 200, out)
        return out

    def test_the_transcript_is_what_was_said(self):
        self.mock.config(audio=True, reply="It is sunny in Oslo today.")
        for stream in (False, True):
            session = "audio-%d" % stream
            msgs = [{"role": "user", "content": "Weather in Oslo?"}]
            out = self.ask(session, stream, msgs)
            if stream:
                chunks = [json.loads(d) for d in sse_data(out.decode()) if d != "[DONE]"]
                deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
                audio_id = deltas[0]["audio"]["id"]
                said = "".join(d.get("audio", {}).get("transcript", "") for d in deltas)
                self.assertIn("UklGRg==", out.decode())  # the audio reaches the client
            else:
                audio = json.loads(out)["choices"][0]["message"]["audio"]
                audio_id, said = audio["id"], audio["transcript"]
            self.assertEqual(said, "It is sunny in Oslo today.")
            reply = self.history(session)[-1]
            self.assertEqual((reply["role"], reply["content"]),
                             ("assistant", "It is sunny in Oslo today."), stream)
            self.assertEqual(reply["metadata"]["audio"],
                             {"id": audio_id, "expires_at": 1900000000}, stream)
            # the client's copy by reference, then its next question
            self.mock.config(audio=False, reply="Bring a jacket.")
            msgs += [{"role": "assistant", "audio": {"id": audio_id}},
                     {"role": "user", "content": "Do I need a jacket?"}]
            self.ask(session, stream, msgs)
            self.mock.config(audio=True, reply="It is sunny in Oslo today.")
            self.assertEqual([(c["turn_id"], c["role"], c["content"],
                               c["metadata"].get("interrupted", False))
                              for c in self.history(session)], [
                (1, "user", "Weather in Oslo?", False),
                (1, "assistant", "It is sunny in Oslo today.", False),
                (2, "user", "Do I need a jacket?", False),
                (2, "assistant", "Bring a jacket.", False)], stream)
            self.assertNotIn("UklGRg==", json.dumps(self.history(session)))

    def test_a_copy_of_unknown_audio_is_a_message_of_its_own(self):
        """A reference to audio memproxy never recorded (another proxy's, an earlier
        session's) is kept as the client sent it: a turn with no text and that id, not
        taken for what was heard of the reply before it."""
        self.mock.config(audio=False, reply="Hello.")
        msgs = [{"role": "user", "content": "Hi"}]
        self.ask("foreign", False, msgs)
        msgs += [{"role": "assistant", "content": "Hello."},
                 {"role": "assistant", "audio": {"id": "audio_elsewhere"}},
                 {"role": "user", "content": "Again?"}]
        self.ask("foreign", False, msgs)
        self.assertEqual([(c["role"], c["content"], c["metadata"].get("audio"),
                           c["metadata"].get("interrupted", False))
                          for c in self.history("foreign")], [
            ("user", "Hi", None, False), ("assistant", "Hello.", None, False),
            ("assistant", "", {"id": "audio_elsewhere"}, False),
            ("user", "Again?", None, False), ("assistant", "Hello.", None, False)])


class HeardNothing(StackTest):
    """A plain client (no turn ids) whose caller barged in before the reply's first word
    sends the reply back empty, flagged or not: that is what was heard of it, the reply's row
    (content empty, the generated text as original, interrupted), not a second reply. A
    message that calls tools says nothing and is a message of its own."""

    def chat(self, body, headers):
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body, headers)
        self.assertEqual(status, 200, out)

    def test_an_empty_copy_is_what_was_heard(self):
        for flag in (False, True):
            session = "nothing-%d" % flag
            msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q1"}]
            self.mock.config(reply="Bubbles is a classic.")
            self.chat({"model": "m", "messages": msgs}, {"X-Session-Id": session})
            empty = {"role": "assistant", "content": ""}
            if flag:
                empty["metadata"] = {"interrupted": True}
            self.mock.config(reply="Finn.")
            self.chat({"model": "m", "messages": msgs + [empty, {"role": "user", "content": "q2"}]},
                      {"X-Session-Id": session})
            rows = db_rows(self.mp.db_path, session)
            self.assertEqual([(r["turn_id"], r["role"], r["content"], r["interrupted"],
                               r["original"]) for r in rows], [
                (1, "user", "q1", 0, None), (1, "assistant", "", 1, "Bubbles is a classic."),
                (2, "user", "q2", 0, None), (2, "assistant", "Finn.", 0, None)])

    def test_a_tool_call_is_not_an_empty_copy(self):
        msgs = [{"role": "user", "content": "Weather?"}]
        self.mock.config(reply="Let me check.")
        self.chat({"model": "m", "messages": msgs}, {"X-Session-Id": "tools"})
        call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
        msgs += [{"role": "assistant", "content": "Let me check."},
                 {"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
        self.mock.config(reply="Sunny.")
        self.chat({"model": "m", "messages": msgs}, {"X-Session-Id": "tools"})
        rows = db_rows(self.mp.db_path, "tools")
        self.assertEqual([(r["role"], r["content"], r["interrupted"]) for r in rows], [
            ("user", "Weather?", 0), ("assistant", "Let me check.", 0), ("assistant", "", 0),
            ("tool", "sunny", 0), ("assistant", "Sunny.", 0)])
        self.assertIn("c1", rows[2]["tool_calls"])

    def test_a_legacy_function_call_is_not_an_empty_copy(self):
        """The same with OpenAI's older functions API: function_call, then a function message.
        The call is kept in the turn's metadata; the next reply is a row of its own (it was
        taken for what was heard of the call, its text left as original)."""
        msgs = [{"role": "user", "content": "Weather?"}]
        self.mock.config(reply="Let me check.")
        self.chat({"model": "m", "messages": msgs}, {"X-Session-Id": "functions"})
        msgs += [{"role": "assistant", "content": "Let me check."},
                 {"role": "assistant", "content": None,
                  "function_call": {"name": "w", "arguments": "{}"}},
                 {"role": "function", "name": "w", "content": "sunny"}]
        self.mock.config(reply="Sunny.")
        self.chat({"model": "m", "messages": msgs}, {"X-Session-Id": "functions"})
        rows = db_rows(self.mp.db_path, "functions")
        self.assertEqual([(r["role"], r["content"], r["interrupted"], r["original"])
                          for r in rows], [
            ("user", "Weather?", 0, None), ("assistant", "Let me check.", 0, None),
            ("assistant", "", 0, None), ("function", "sunny", 0, None),
            ("assistant", "Sunny.", 0, None)])
        self.assertEqual(json.loads(rows[2]["metadata"])["function_call"],
                         {"name": "w", "arguments": "{}"})

    def test_a_legacy_function_call_reply_is_recorded(self):
        """The model's own function_call (streamed in pieces, or whole) is recorded as the
        reply's metadata.function_call, and the client's copy of it coming back is that row."""
        for stream in (False, True):
            session = "called-%d" % stream
            self.mock.config(function_call="weather", reply='{"city": "Oslo"}')
            msgs = [{"role": "user", "content": "Weather in Oslo?"}]
            status, _, out = self.mp.request("POST", "/v1/chat/completions", {
                "model": "m", "stream": stream, "messages": msgs}, {"X-Session-Id": session})
            self.assertEqual(status, 200, out)
            self.mock.config(function_call=None, reply="Sunny.")
            msgs += [{"role": "assistant", "content": None,
                      "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
                     {"role": "function", "name": "weather", "content": "sunny"}]
            self.chat({"model": "m", "messages": msgs}, {"X-Session-Id": session})
            rows = db_rows(self.mp.db_path, session)
            self.assertEqual([(r["role"], r["content"], r["interrupted"], r["original"])
                              for r in rows], [
                ("user", "Weather in Oslo?", 0, None), ("assistant", "", 0, None),
                ("function", "sunny", 0, None), ("assistant", "Sunny.", 0, None)], stream)
            self.assertEqual(json.loads(rows[1]["metadata"])["function_call"],
                             {"name": "weather", "arguments": '{"city": "Oslo"}'})
            self.assertEqual(rows[1]["finish_reason"], "stop")


# A reply whose words as spoken begin "w0 w1 w2", written with markdown, paragraphs and
# Unicode's spaces (a no-break space, a narrow one).
SPOKEN_REPLY = "**w0**\u00a0w1\n\n_w2_\u202f " + " ".join("w%d" % i for i in range(3, 200))


Q1 = {"role": "user", "content": "q1", "turn_id": 1}


def heard_then_q2(test, mp, session, heard):
    """Agora's request after a barge-in on reply 1: q1, what was heard of the reply (flagged
    interrupted), and q2; answered 200."""
    status, _, out = mp.request("POST", "/v1/chat/completions", {
        "model": "m", "session_id": session, "messages": [
            Q1, {"role": "assistant", "content": heard, "turn_id": 1,
                 "metadata": {"interrupted": True, "source": "llm"}},
            {"role": "user", "content": "q2", "turn_id": 2}]})
    test.assertEqual(status, 200, out)


WORDS = " ".join("w%d" % i for i in range(200))


def barge_in_read_first(test, mock, first, second, timeout=5.0, reply=WORDS, heard="w0 w1 w2"):
    """The barge-in above: the reply streams from memproxy `first`, the next request (the
    heard part, "w0 w1 w2" or nothing, and q2) is answered by `second` (the same process, or
    another replica on the same database), then the stream is hung up. The four rows test
    checks are the same. reply: what the model says (its words as spoken begin "w0 w1 w2
    w3")."""
    mock.config(reply=reply)
    s = raw_connect(first.port)
    raw_request(s, "/v1/chat/completions", {"model": "m", "stream": True,
                                            "session_id": "both", "messages": [Q1]})
    raw_read_until(s, lambda got: got.count(b"data: ") >= 6)
    mock.config(reply="second")
    heard_then_q2(test, second, "both", heard)
    s.close()
    rows = wait_for(lambda: (lambda r: r if len(r) == 4 and r[1]["latency_us"] else None)(
        db_rows(first.db_path, "both")), timeout=timeout, what="the first reply recorded")
    test.assertEqual([(r["turn_id"], r["role"], r["content"]) for r in rows], [
        (1, "user", "q1"), (1, "assistant", heard), (2, "user", "q2"),
        (2, "assistant", "second")])
    test.assertEqual(rows[1]["interrupted"], 1)
    original = rows[1]["original"]  # what was generated before the hang-up: more than heard
    test.assertTrue(reply.startswith(original), original)
    test.assertEqual(original.replace("*", "").replace("_", "").split()[:4],
                     ["w0", "w1", "w2", "w3"], original)
    test.assertEqual(rows[1]["finish_reason"], "client_disconnected")
    return rows


def barge_in_keeps_thinking(test, mock, first, second, timeout=5.0):
    """barge_in_read_first with a reasoning model: the merged row keeps the reply's
    metadata.reasoning, whichever of the two rows came first. (One word of thinking, one
    chunk: the heard part goes when the reply's first words have.)"""
    mock.config(reasoning="Counting.")
    try:
        rows = barge_in_read_first(test, mock, first, second, timeout=timeout)
    finally:
        mock.config(reasoning=None)
    test.assertEqual(json.loads(rows[1]["metadata"]).get("reasoning"), "Counting.")


def audio_by_reference_read_first(test, mock, first, second, timeout=5.0):
    """An audio reply comes back by reference (audio: {id}, no text), flagged, before its
    stream's hang-up, read by memproxy `second` (the same process, or another replica on the
    same database) while `first` streams the reply: a reference says nothing of what was
    heard, so the reply recorded at the hang-up takes its row as it was generated (its
    transcript so far), interrupted, not as a reply heard as nothing."""
    mock.config(audio=True, reply=WORDS)
    s = raw_connect(first.port)
    raw_request(s, "/v1/chat/completions", {"model": "m", "stream": True,
                                            "session_id": "aud", "messages": [Q1]})
    got = raw_read_until(s, lambda got: got.count(b"data: ") >= 6)
    audio_id = json.loads(sse_data(got.decode())[0])["choices"][0]["delta"]["audio"]["id"]
    mock.config(audio=False, reply="second")
    status, _, out = second.request("POST", "/v1/chat/completions", {
        "model": "m", "session_id": "aud", "messages": [
            Q1, {"role": "assistant", "audio": {"id": audio_id}, "turn_id": 1,
                 "metadata": {"interrupted": True}},
            {"role": "user", "content": "q2", "turn_id": 2}]})
    test.assertEqual(status, 200, out)
    s.close()
    rows = wait_for(lambda: (lambda r: r if len(r) == 4 and r[1]["latency_us"] else None)(
        db_rows(first.db_path, "aud")), timeout=timeout, what="the audio reply recorded")
    test.assertEqual([(r["turn_id"], r["role"]) for r in rows], [
        (1, "user"), (1, "assistant"), (2, "user"), (2, "assistant")])
    said = rows[1]["content"]
    test.assertEqual(said.split()[:4], ["w0", "w1", "w2", "w3"], said)
    test.assertTrue(WORDS.startswith(said), said)
    test.assertEqual((rows[1]["interrupted"], rows[1]["finish_reason"]),
                     (1, "client_disconnected"))
    test.assertEqual(json.loads(rows[1]["metadata"])["audio"]["id"], audio_id)


class CrashAfterDone(unittest.TestCase):
    """kill -9 right after the client has [DONE]: the turn is in the database."""

    def test_turn_survives_kill_9(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(upstream=mock.url)
        mock.config(reply="durable answer")
        s = raw_connect(mp.port)
        raw_request(s, "/v1/chat/completions",
                    dict(USER_HI, stream=True, session_id="crash"))
        got = b""
        while b"data: [DONE]" not in got:
            chunk = s.recv(65536)
            self.assertTrue(chunk, "connection closed before [DONE]")
            got += chunk
        mp.proc.send_signal(signal.SIGKILL)
        mp.proc.wait(5)
        mp.log.close()
        s.close()
        mp2 = Memproxy(upstream=mock.url, db=mp.db_path)
        self.addCleanup(mp2.stop)
        rows = db_rows(mp.db_path, "crash")
        self.assertEqual([(r["role"], r["content"]) for r in rows],
                         [("user", "hi"), ("assistant", "durable answer")])
        if BACKEND == "sqlite":  # the file memproxy wrote itself (PostgreSQL's is the server's)
            con = db_connect(mp.db_path)
            self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            con.close()


class Concurrency(unittest.TestCase):
    """200 sessions talking at once, 20 turns each, over 4 workers."""

    def test_no_lost_and_no_duplicated_row(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy("server:\n  workers: 4\n", upstream=mock.url)
        self.addCleanup(mp.stop)
        errors = []

        def converse(n):
            c = http.client.HTTPConnection("127.0.0.1", mp.port, timeout=30)
            msgs = []
            try:
                for t in range(20):
                    msgs.append({"role": "user", "content": "s%d q%d" % (n, t)})
                    c.request("POST", "/v1/chat/completions",
                              json.dumps({"model": "m", "stream": t % 2 == 0, "messages": msgs}),
                              {"Content-Type": "application/json", "X-Session-Id": "c%d" % n})
                    r = c.getresponse()
                    body = r.read()
                    if r.status != 200:
                        raise AssertionError("status %d: %s" % (r.status, body[:200]))
                    text = body.decode()
                    reply = (chat_text(sse_data(text)) if t % 2 == 0
                             else json.loads(text)["choices"][0]["message"]["content"])
                    msgs.append({"role": "assistant", "content": reply})
            except Exception as e:  # reported below, with the session
                errors.append("c%d: %r" % (n, e))
            finally:
                c.close()

        threads = [threading.Thread(target=converse, args=(n,)) for n in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(errors, [])
        con = db_connect(mp.db_path)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0], 200)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM messages").fetchone()[0], 200 * 40)
        # per session: 20 turns of (user, assistant), numbered 1..40, each question once
        bad = con.execute(
            "SELECT s.id, COUNT(*), COUNT(DISTINCT m.turn_id || '/' || m.role), MIN(m.seq), "
            "MAX(m.seq) FROM messages m JOIN sessions s ON s.sid = m.sid GROUP BY s.sid "
            "HAVING COUNT(*) != 40 OR COUNT(DISTINCT m.turn_id || '/' || m.role) != 40 "
            "OR MIN(m.seq) != 1 OR MAX(m.seq) != 40").fetchall()
        self.assertEqual(bad, [])
        users = con.execute("SELECT COUNT(DISTINCT content) FROM messages "
                            "WHERE role = 'user'").fetchone()[0]
        self.assertEqual(users, 4000)
        wrong = con.execute("SELECT COUNT(*) FROM messages m JOIN sessions s ON s.sid = m.sid "
                            "WHERE m.role = 'user' AND m.content NOT LIKE "
                            "'s' || substr(s.id, 2) || ' q%'").fetchone()[0]
        self.assertEqual(wrong, 0)  # no turn recorded under another session
        con.close()



class AccessLog(unittest.TestCase):
    """One access line per request (log.access), checked field by field."""

    def start(self, config=""):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        mp = Memproxy(config, upstream=self.mock.url)
        self.addCleanup(mp.stop)
        return mp

    def test_a_streamed_recorded_request(self):
        mp = self.start()
        body = dict(USER_HI, stream=True)
        status, _, out = mp.request("POST", "/v1/chat/completions?x=1", body,
                                    {"X-Session-Id": "acc-1", "X-User-Id": "u 7"})
        self.assertEqual(status, 200)
        mp.request("GET", "/healthz")
        line = wait_for(lambda: [l for l in mp.output().splitlines() if " access POST " in l],
                        what="the access line")[0]
        self.assertRegex(line, r" info \[w\d+\] access POST /v1/chat/completions 200 ms=[0-9.]+ "
                               r"ttft_ms=[0-9.]+ bytes=(\d+) tenant=default session=acc-1 "
                               r'user="u 7" profile=default upstream=\S+ model=gpt-4o-mini$')
        self.assertEqual(int(line.split("bytes=")[1].split()[0]), len(out))
        self.assertNotIn("Authorization", mp.output())
        other = [l for l in mp.output().splitlines() if " access GET /healthz 200" in l]
        self.assertEqual(len(other), 1)

    def test_json_lines_and_off(self):
        mp = self.start("log:\n  access: json\n")
        mp.request("POST", "/v1/chat/completions", USER_HI, {"X-Session-Id": "acc-2"})
        line = wait_for(lambda: [l for l in mp.output().splitlines() if " access {" in l],
                        what="the access line")[0]
        rec = json.loads(line.split(" access ", 1)[1])
        self.assertEqual((rec["method"], rec["path"], rec["status"], rec["session"]),
                         ("POST", "/v1/chat/completions", 200, "acc-2"))
        off = self.start("log:\n  access: off\n")
        off.request("POST", "/v1/chat/completions", USER_HI)
        self.assertNotIn(" access ", off.output())


if __name__ == "__main__":
    unittest.main()
