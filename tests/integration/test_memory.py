"""Long-term memory made at stop (docs/design.md §10): a summary and facts of the caller from what was
said and heard, stored per user, injected into their next sessions, carried by the stop's
webhook dump; malformed summarizer output stores nothing. The mock upstream plays both the
voice agent's LLM and the summarizer: the test scripts its reply before each stop."""
import json
import sqlite3
import time
import unittest

from harness import Memproxy, Mock, sse_data, wait_for, db_connect
from test_lifecycle import Receiver, fixture

CONFIG = """
auth:
  admin_keys: [admin-0123456789abcdef]
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - name: default
    upstream: mock
    summarize: true
    summary_wait: 5s
    summary_retry: 1s
webhooks:
  - {url: "%s", secret: s3cret-0123456789abcdef, backoff: 200ms}
"""

SUMMARY_1 = {"summary": "Caller 1002 asked for a joke about cats and cut the first one short.",
             "facts": [{"category": "preference", "key": "humour", "value": "cat jokes",
                        "confidence": 0.8},
                       {"category": "profile", "key": "name", "value": "Sam",
                        "confidence": 0.1}]}
SUMMARY_2 = {"summary": "Caller 1002 likes cat jokes; came back to say hello.",
             "facts": [{"category": "preference", "key": "humour", "value": "cat jokes",
                        "confidence": 0.5}]}


class Summaries(unittest.TestCase):
    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.recv = Receiver()
        self.addCleanup(self.recv.stop)
        self.mp = Memproxy(CONFIG % self.recv.url, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def chat(self, body):
        status, _, out = self.mp.request("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, out)

    def api(self, method, path, body=None):
        status, out = self.mp.json(method, path, body, {"Authorization": "Bearer admin-0123456789abcdef"})
        self.assertEqual(status, 200, out)
        return out

    def stop_with(self, sid, answer):
        """Script the summarizer's answer, stop the session, wait for its dump."""
        self.mock.config(reply=answer)
        n = len(self.recv.dumps())
        self.api("POST", "/v1/sessions/%s/stop" % sid)
        wait_for(lambda: len(self.recv.dumps()) > n, timeout=10, what="the dump of " + sid)
        return json.loads(self.recv.dumps()[-1][1])

    def sent_messages(self):
        return json.loads(self.mock.stats()["last_body"])["messages"]

    def test_summary_and_facts_reach_the_next_session_of_the_same_user_only(self):
        fx = fixture("agora-custom-request.json")
        cut = fx["messages"][3]
        heard, generated = cut["content"], cut["metadata"]["original"]
        self.assertTrue(generated.startswith(heard) and len(generated) > len(heard))
        self.mock.config(reply="You asked for a joke about cats.")
        self.chat(fx)

        dump = self.stop_with("room-42-agent", json.dumps(SUMMARY_1))
        # what the summarizer was asked: the heard text, never the unspoken rest
        asked = self.sent_messages()
        self.assertEqual(asked[0]["role"], "system")
        convo = asked[1]["content"]
        self.assertIn("ASSISTANT: " + heard, convo)
        self.assertNotIn(generated[len(heard):].strip(), convo)
        self.assertIn("USER: Tell me a joke", convo)
        # the platform's own lines are not the conversation (summary_skip_sources)
        self.assertNotIn("Are you still there?", convo)
        self.assertNotIn("Hi, what can I do for you?", convo)
        metrics = self.mp.request("GET", "/metrics")[2].decode()
        self.assertIn('memproxy_summaries_total{result="stored"} 1', metrics)
        # the dump waited for the summary and carries it
        self.assertEqual(dump["payload"]["summary"], SUMMARY_1["summary"])
        mem = self.api("GET", "/v1/users/1002/memory")
        self.assertEqual(mem["summary"]["text"], SUMMARY_1["summary"])
        first_from = mem["summary"]["from_ms"]
        self.assertEqual({(f["key"], f["value"]) for f in mem["facts"]},
                         {("humour", "cat jokes"), ("name", "Sam")})

        # session 2 of the same user: summary and facts before the first user turn
        self.mock.config(reply="Hello again!")
        self.chat({"model": "m", "session_id": "s2", "user_id": "1002",
                   "messages": [{"role": "system", "content": "You are a voice agent."},
                                {"role": "user", "content": "Hi, it's me again."}]})
        sent = self.sent_messages()
        first_user = next(i for i, m in enumerate(sent) if m["role"] == "user")
        system_text = " ".join(m["content"] for m in sent[:first_user] if m["role"] == "system")
        self.assertIn(SUMMARY_1["summary"], system_text)
        self.assertIn("cat jokes", system_text)
        # user V sees nothing of it
        self.chat({"model": "m", "session_id": "v1", "user_id": "V",
                   "messages": [{"role": "user", "content": "Hello"}]})
        self.assertNotIn("cat", json.dumps(self.sent_messages()))

        # session 2 stops: its summary replaces the first, the range widens, a fact seen
        # again is reinforced, one not seen decays (and under the floor, is forgotten)
        self.stop_with("s2", json.dumps(SUMMARY_2))
        mem = wait_for(lambda: (lambda m: m["summary"]["text"] == SUMMARY_2["summary"] and m)(
            self.api("GET", "/v1/users/1002/memory")), what="the second summary")
        self.assertEqual(mem["summary"]["from_ms"], first_from)
        self.assertGreater(mem["summary"]["to_ms"], first_from)
        [humour] = mem["facts"]
        self.assertEqual((humour["key"], humour["seen"]), ("humour", 2))
        self.assertAlmostEqual(humour["confidence"], 0.9)

    def test_a_reasoning_model_summarizes_too(self):
        """A reasoning model as the summarizer: served without a reasoning parser it writes its
        thinking into the answer before the JSON (<think>...</think>, DeepSeek-R1, Qwen3);
        Mistral's thinking models answer with content parts (a thinking part, a text part).
        The summary is the JSON either way."""
        for i, (answer, parts) in enumerate([
                ("<think>\nThe caller gave a name. {\"draft\": 1}\n</think>\n\n" +
                 json.dumps(SUMMARY_2), False),
                (json.dumps(SUMMARY_2), True)]):
            sid, user = "r%d" % i, "R%d" % i
            self.mock.config(reply="Sure.")
            self.chat({"model": "m", "session_id": sid, "user_id": user,
                       "messages": [{"role": "user", "content": "My name is Kim."}]})
            self.mock.config(thinking_parts=parts)
            try:
                dump = self.stop_with(sid, answer)
            finally:
                self.mock.config(thinking_parts=False)
            self.assertEqual(dump["payload"].get("summary"), SUMMARY_2["summary"], answer)
            mem = self.api("GET", "/v1/users/%s/memory" % user)
            self.assertEqual(mem["summary"]["text"], SUMMARY_2["summary"])

    def test_malformed_answers_store_nothing_and_the_dump_goes_without(self):
        for i, answer in enumerate(["this is not JSON", '{"summary": 42}',
                                    '{"facts": []}', '["summary"]']):
            sid, user = "w%d" % i, "W%d" % i
            self.mock.config(reply="Sure.")
            self.chat({"model": "m", "session_id": sid, "user_id": user,
                       "messages": [{"role": "user", "content": "My name is Kim."}]})
            t0 = time.monotonic()
            dump = self.stop_with(sid, answer)
            self.assertLess(time.monotonic() - t0, 4.5)  # not held for the full wait
            self.assertNotIn("summary", dump["payload"])
            self.assertEqual(self.api("GET", "/v1/users/%s/memory" % user),
                             {"user_id": user, "summary": None, "facts": []})
        self.assertIn("summary not stored", self.mp.output())

    def test_a_summary_interrupted_by_a_restart_is_made_after_it(self):
        self.mock.config(reply="Sure.")
        self.chat({"model": "m", "session_id": "r1", "user_id": "R",
                   "messages": [{"role": "user", "content": "Remember me."}]})
        self.mock.config(hang=True)  # the summary request gets no answer...
        self.api("POST", "/v1/sessions/r1/stop")
        wait_for(lambda: self.mock.stats()["chat_requests"] >= 2, what="the summary request")
        self.mp.stop()  # ...and memproxy stops meanwhile
        self.assertEqual(self.recv.dumps(), [])
        self.mock.config(hang=False, reply=json.dumps(SUMMARY_1))
        self.mp = Memproxy(CONFIG % self.recv.url, upstream=self.mock.url, db=self.mp.db_path)
        self.addCleanup(self.mp.stop)  # setUp's cleanup stops the first one only
        mem = wait_for(lambda: self.api("GET", "/v1/users/R/memory")["summary"], timeout=10,
                       what="the summary after the restart")
        self.assertEqual(mem["text"], SUMMARY_1["summary"])
        wait_for(lambda: self.recv.dumps(), what="the dump")
        self.assertEqual(json.loads(self.recv.dumps()[0][1])["payload"]["summary"],
                         SUMMARY_1["summary"])

    def test_failed_summarizer_stores_nothing_and_is_tried_again(self):
        self.mock.config(reply="Sure.")
        self.chat({"model": "m", "session_id": "f1", "user_id": "F",
                   "messages": [{"role": "user", "content": "Remember me."}]})
        self.mock.config(fail_status=500)
        dump = self.stop_with("f1", "unused")
        # the dump went at once, without a summary; nothing stored; the session waits again
        self.assertNotIn("summary", dump["payload"])
        self.assertIn("summary not made", self.mp.output())
        self.assertIn("it will be tried again", self.mp.output())
        self.assertIsNone(self.api("GET", "/v1/users/F/memory")["summary"])
        con = db_connect(self.mp.db_path)
        self.addCleanup(con.close)
        row = con.execute("SELECT summarized_ms, summary_tries FROM sessions WHERE id = 'f1'")
        self.assertEqual(row.fetchone(), (None, 1))
        # the upstream is back: the retry (summary_retry: 1s here) stores the summary
        self.mock.config(fail_status=0, reply=json.dumps(SUMMARY_2))
        wait_for(lambda: self.api("GET", "/v1/users/F/memory")["summary"], timeout=10,
                 what="the retried summary")
        self.assertEqual(self.api("GET", "/v1/users/F/memory")["summary"]["text"],
                         SUMMARY_2["summary"])
        self.assertIsNotNone(con.execute("SELECT summarized_ms FROM sessions WHERE id = 'f1'")
                             .fetchone()[0])
        self.assertEqual(len(self.recv.dumps()), 1)  # the dump is not sent twice

CALL_INTRO = "Summary of this call so far"


class RunningSummaries(unittest.TestCase):
    """summary_threshold: a running call's own summary of the turns its client's window no
    longer holds (memory/callsum.h). The mock's summaries mode answers a summarizer's request
    with the conversation lines it was given, so the summary shows which turns it covers."""

    def start(self, threshold, extra=""):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        cfg = (CONFIG % "http://127.0.0.1:9/unused").replace(
            "summary_wait: 5s", "summary_wait: 5s\n    summary_threshold: %d%s" % (threshold, extra))
        self.cfg = cfg
        self.mp = Memproxy(cfg, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)
        self.mock.config(summaries=True)
        self.hdr = {"Authorization": "Bearer admin-0123456789abcdef"}

    def ask(self, sid, messages, k):
        """Request k of a call: the mock answers "Answer k." (or, echoing, what it was sent)."""
        self.mock.config(reply="Answer %d." % k)
        status, _, out = self.mp.request("POST", "/v1/chat/completions", {
            "model": "m", "session_id": sid, "user_id": "L", "stream": False,
            "messages": messages})
        self.assertEqual(status, 200, out)
        return json.loads(out)["choices"][0]["message"]["content"]

    def through(self, sid):
        cs = self.mp.json("GET", "/v1/sessions/" + sid, headers=self.hdr)[1]["call_summary"]
        return cs and cs["through_seq"]

    def sent_upstream(self, sid, messages, k):
        """What the upstream got for request k (the mock echoing it)."""
        self.mock.config(echo=True)
        try:
            self.echoed = self.ask(sid, messages, k)
            return json.loads(self.echoed)
        finally:
            self.mock.config(echo=False)

    def test_a_sliding_window_gets_one_summary_of_exactly_the_turns_it_left_out(self):
        # every turn that leaves makes a pass: however the passes fall between requests, the
        # summary reaches turn 5 once request 4's reply is stored
        self.start(1)
        system = {"role": "system", "content": "You are a travel agent."}
        conv, expect = [], {2: None, 3: None, 4: 5}
        for k in range(1, 5):
            conv.append({"role": "user", "content": "Question %d?" % k})
            self.ask("slide", [system] + conv[-4:], k)  # a window of 4, as Agora keeps
            conv.append({"role": "assistant", "content": "Answer %d." % k})
            if expect.get(k):
                wait_for(lambda: self.through("slide") == expect[k], timeout=20,
                         what="the call's summary through turn %d" % expect[k])
        conv.append({"role": "user", "content": "Question 5?"})
        window = conv[-4:]
        sent = self.sent_upstream("slide", [system] + window, 5)
        summaries = [m for m in sent if m["role"] == "system" and CALL_INTRO in m["content"]]
        self.assertEqual(len(summaries), 1, sent)
        self.assertEqual(summaries[0]["role"], "system")
        left = " | ".join("%s: %s" % (m["role"].upper(), m["content"]) for m in conv[:-4])
        self.assertIn("<<<memory\n" + left + "\nmemory>>>", summaries[0]["content"])
        self.assertEqual([m for m in sent if m["role"] != "system"], window)
        # the call's summary is its own: the caller's long-term memory waits for the stop
        mem = self.mp.json("GET", "/v1/users/L/memory", headers=self.hdr)[1]
        self.assertIsNone(mem["summary"])
        self.assertFalse(any("earlier conversations" in m.get("content", "") for m in sent))

    def test_a_client_that_resends_everything_gets_no_summary(self):
        self.start(1)
        conv = []
        for k in range(1, 7):
            conv.append({"role": "user", "content": "Question %d?" % k})
            if k == 6:
                sent = self.sent_upstream("all", conv, k)
            else:
                self.ask("all", conv, k)
            conv.append({"role": "assistant", "content": "Answer %d." % k})
        self.assertFalse(any(m["role"] == "system" and CALL_INTRO in m["content"] for m in sent), sent)
        self.assertEqual(len(sent), 11)
        self.assertIsNone(self.through("all"))

    def test_stored_history_puts_the_summary_in_place_of_the_turns_it_covers(self):
        self.start(2, "\n    history: stored\n    token_budget: 40")
        for k in range(1, 9):
            self.ask("kept", [{"role": "user", "content": "Question %d?" % k}], k)
            wait_for(lambda: self.mp.json("GET", "/v1/sessions/kept", headers=self.hdr)[1]
                     ["turns"] == 2 * k, timeout=10, what="turn %d stored" % k)
        through = wait_for(lambda: self.through("kept"), timeout=20, what="a call summary")
        sent = self.sent_upstream("kept", [{"role": "user", "content": "Question 9?"}], 9)
        summaries = [m for m in sent if m["role"] == "system" and CALL_INTRO in m["content"]]
        self.assertEqual(len(summaries), 1, sent)
        # the summary is of the call's first turns, in order; what is sent is the newest
        # turns after them, as they were: no turn both summarized and sent
        conv = []
        for k in range(1, 10):
            conv += [{"role": "user", "content": "Question %d?" % k},
                     {"role": "assistant", "content": "Answer %d." % k}]
        lines = summaries[0]["content"].split("<<<memory\n")[1].split("\nmemory>>>")[0]
        parts = lines.split(" | ")
        self.assertGreaterEqual(len(parts), through)
        self.assertEqual(parts, ["%s: %s" % (m["role"].upper(), m["content"])
                                 for m in conv[:len(parts)]])
        turns = [m for m in sent if m["role"] != "system"]
        self.assertGreater(len(turns), 1)
        self.assertEqual(turns, conv[17 - len(turns):17])
        self.assertGreaterEqual(17 - len(turns), len(parts))
        # started again with room for everything: the summary still stands in for its turns,
        # and every turn after them is sent
        self.mp.stop()
        self.mp = Memproxy(self.cfg.replace("token_budget: 40", "token_budget: 100000"),
                           upstream=self.mock.url, db=self.mp.db_path)
        self.addCleanup(self.mp.stop)
        conv[17] = {"role": "assistant", "content": self.echoed}
        sent = self.sent_upstream("kept", [{"role": "user", "content": "Question 10?"}], 10)
        summaries = [m for m in sent if m["role"] == "system" and CALL_INTRO in m["content"]]
        self.assertEqual(len(summaries), 1, sent)
        lines = summaries[0]["content"].split("<<<memory\n")[1].split("\nmemory>>>")[0]
        n = len(lines.split(" | "))
        self.assertEqual([m for m in sent if m["role"] != "system"],
                         conv[n:18] + [{"role": "user", "content": "Question 10?"}])


class Cache(unittest.TestCase):
    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        cfg = (CONFIG % "http://127.0.0.1:9/unused").replace(
            "summarize: true", "summarize: false\n    cache: true\n    cache_ttl: 1h")
        self.mp = Memproxy(cfg, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)
        self.mock.config(reply="We are open from nine to five.")

    def ask(self, sid, messages, stream=True, headers=None):
        body = {"model": "gpt-4o-mini", "session_id": sid, "user_id": "U", "stream": stream,
                "messages": messages}
        status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", body, headers)
        self.assertEqual(status, 200, out)
        return hdrs.get("x-memproxy-cache"), out.decode()

    def upstream_calls(self):
        return self.mock.stats()["chat_requests"]

    def test_context_free_turns_are_answered_from_the_cache(self):
        system = {"role": "system", "content": "You answer for Acme's front desk."}
        q = [system, {"role": "user", "content": "What are your opening hours?"}]
        state, first = self.ask("c1", q)
        self.assertEqual((state, self.upstream_calls()), ("miss", 1))
        # asked again (case and spacing aside), by another session: no upstream call
        q2 = [system, {"role": "user", "content": "  what are your opening   HOURS? "}]
        state, again = self.ask("c2", q2)
        self.assertEqual((state, self.upstream_calls()), ("hit", 1))
        chunks = [json.loads(d) for d in sse_data(again) if d != "[DONE]"]
        self.assertEqual("".join(c["choices"][0]["delta"].get("content", "") for c in chunks
                                 if c["choices"]), "We are open from nine to five.")
        self.assertTrue(again.rstrip().endswith("data: [DONE]"))
        state, body = self.ask("c3", q2, stream=False)
        self.assertEqual(state, "hit")
        self.assertEqual(json.loads(body)["choices"][0]["message"]["content"],
                         "We are open from nine to five.")
        # /metrics counts lookups by result, and every status exactly (no "other" for 2xx)
        metrics = self.mp.request("GET", "/metrics")[2].decode()
        self.assertIn('memproxy_cache_lookups_total{result="hit"} 2', metrics)
        self.assertIn('memproxy_cache_lookups_total{result="miss"} 1', metrics)
        self.assertIn('memproxy_requests_total{route="chat",status="200"} 3', metrics)
        self.assertNotIn('status="other"', metrics)
        # the hit is recorded as the session's turn
        status, h = self.mp.json("GET", "/v1/sessions/c2/history",
                                 headers={"Authorization": "Bearer admin-0123456789abcdef"})
        self.assertEqual([c["content"] for c in h["contents"]],
                         [q2[1]["content"], "We are open from nine to five."])
        # a turn that depends on earlier context never comes from the cache
        ctx = [system, {"role": "user", "content": "I'm calling about my order."},
               {"role": "assistant", "content": "Sure, which order?"},
               {"role": "user", "content": "What are your opening hours?"}]
        state, _ = self.ask("c4", ctx)
        self.assertEqual((state, self.upstream_calls()), (None, 2))
        # other system messages are another question; no-cache goes upstream
        other = [{"role": "system", "content": "You answer for Bolt's front desk."}, q[1]]
        self.assertEqual(self.ask("c5", other)[0], "miss")
        self.ask("c6", q, headers={"Cache-Control": "no-cache"})
        self.assertEqual(self.upstream_calls(), 4)
        # erased with the user
        con = db_connect(self.mp.db_path)
        self.assertGreater(con.execute("SELECT COUNT(*) FROM answer_cache WHERE user_id = 'U'")
                           .fetchone()[0], 0)
        status, _ = self.mp.json("DELETE", "/v1/users/U", headers={"Authorization": "Bearer admin-0123456789abcdef"})
        self.assertEqual(status, 200)
        self.assertEqual(con.execute("SELECT COUNT(*) FROM answer_cache").fetchone()[0], 0)
        con.close()
        self.assertEqual(self.ask("c7", q)[0], "miss")



RETRIEVAL = """
auth:
  admin_keys: [admin-0123456789abcdef]
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - name: default
    upstream: mock
    retrieval: true
    retrieval_model: mock-embed
    retrieval_timeout: %s
"""

GATE = "The gate code for the north warehouse is 4417."
ALLERGY = "I am allergic to penicillin."


class Retrieval(unittest.TestCase):
    """Tri-hybrid retrieval: recency, salience (importance >= 0.85) and relevance (cosine of the
    mock's word vectors >= 0.655) over a caller's earlier turns, as one system message."""

    def start(self, budget):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(RETRIEVAL % budget, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)
        self.mock.config(embed_words=True, reply="Noted.")
        self.db = db_connect(self.mp.db_path)
        self.addCleanup(self.db.close)

    def count(self, sql):
        return self.db.execute(sql).fetchone()[0]

    def first_call(self, user, gate=GATE):
        """Session 1 of user: the gate code first, a flagged allergy, then small talk: 12
        turns, each request carrying the window so far as a voice platform does."""
        window = []
        said = [gate, "Can you tell me the weather for Monday?", "What about Tuesday?",
                {"content": ALLERGY, "importance": 0.9}] + \
            ["Tell me a fact about day %d of the month." % d for d in range(1, 9)]
        for text in said:
            msg = {"role": "user"}
            msg.update(text if isinstance(text, dict) else {"content": text})
            window.append(msg)
            status, _, out = self.mp.request("POST", "/v1/chat/completions", {
                "model": "m", "session_id": user + "-call-1", "user_id": user,
                "messages": window})
            self.assertEqual(status, 200, out)
            window.append({"role": "assistant", "content": "Noted."})
        # every user and assistant turn gets its embedding in the background
        wait_for(lambda: self.count("SELECT COUNT(*) FROM embeddings e JOIN sessions s "
                                    "USING (sid) WHERE e.vec IS NOT NULL AND s.id = '%s-call-1'"
                                    % user) == 24, timeout=15, what="the turns' embeddings")

    def ask(self, user, question):
        """A new session of user asks; the messages the upstream got (mock echo) and
        X-Memproxy-Context."""
        self.mock.config(echo=True)
        status, hdrs, out = self.mp.request("POST", "/v1/chat/completions", {
            "model": "m", "session_id": user + "-call-2", "user_id": user,
            "messages": [{"role": "system", "content": "You are the depot's assistant."},
                         {"role": "user", "content": question}]})
        self.assertEqual(status, 200, out)
        self.mock.config(echo=False)
        sent = json.loads(json.loads(out)["choices"][0]["message"]["content"])
        return sent, hdrs["x-memproxy-context"]

    @staticmethod
    def recalled(sent):
        found = [m["content"] for m in sent if m["role"] == "system" and
                 m["content"].startswith("Earlier messages")]
        return found[0] if found else ""

    def test_the_question_is_embedded_once(self):
        self.start("5s")
        self.first_call("U")
        before = self.mock.stats()["embedding_inputs"]
        self.ask("U", "What is the gate code for the north warehouse?")
        wait_for(lambda: self.count("SELECT COUNT(*) FROM embeddings e JOIN sessions s "
                                    "USING (sid) WHERE e.vec IS NOT NULL AND s.id = 'U-call-2'")
                 == 2, timeout=15, what="the question's and the reply's embeddings")
        # the question was embedded for its recall and its turn kept that embedding: the
        # upstream embedded it once, and the reply once in the background
        self.assertEqual(self.mock.stats()["embedding_inputs"] - before, 2)
        self.assertEqual(self.count("SELECT COUNT(*) FROM embed_queue"), 0)
        model = self.count("SELECT e.model FROM embeddings e JOIN messages m USING (sid, seq) "
                           "JOIN sessions s USING (sid) WHERE s.id = 'U-call-2' AND "
                           "m.role = 'user'")
        self.assertEqual(model, self.count("SELECT model FROM embeddings LIMIT 1"))

    def test_a_relevant_old_message_is_injected(self):
        self.start("5s")
        self.first_call("U")
        self.assertEqual(self.count("SELECT COUNT(*) FROM embeddings e JOIN messages m "
                                    "USING (sid, seq) WHERE m.role NOT IN ('user', 'assistant')"),
                         0)
        sent, ctx = self.ask("U", "What is the gate code for the north warehouse?")
        memory = self.recalled(sent)
        self.assertIn(GATE, memory)                                # relevance
        self.assertIn(ALLERGY, memory)                             # salience
        self.assertIn("Tell me a fact about day 8", memory)        # recency: the latest turns
        self.assertNotIn("What about Tuesday?", memory)            # none of the three
        self.assertLess(memory.index(GATE), memory.index(ALLERGY))  # oldest first
        # one system message, after the client's system message and before the question
        self.assertEqual([m["role"] for m in sent], ["system", "system", "user"])
        self.assertNotIn("importance", json.dumps(sent))
        self.assertRegex(ctx, r"injected=1; recalled=\d+")
        _, _, metrics = self.mp.request("GET", "/metrics")
        self.assertRegex(metrics.decode(), r'memproxy_recall_lookups_total\{result="ready"\} [1-9]')
        self.assertIn('memproxy_recall_lookups_total{result="late"} 0', metrics.decode())
        self.assertRegex(metrics.decode(), r'memproxy_embeddings_total\{result="stored"\} [1-9]')
        # another caller sees nothing of U's
        self.first_call("V", gate=GATE.replace("4417", "5521"))
        sent, _ = self.ask("V", "What is the gate code for the north warehouse?")
        self.assertIn("5521", self.recalled(sent))
        self.assertNotIn("4417", json.dumps(sent))
        # erasing U removes U's embeddings (and queue rows) with the turns, not V's
        u = ("SELECT COUNT(*) FROM embeddings e JOIN sessions s USING (sid) "
             "WHERE s.user_id = '%s'")
        self.assertGreater(self.count(u % "U"), 0)
        status, _ = self.mp.json("DELETE", "/v1/users/U", headers={"Authorization": "Bearer admin-0123456789abcdef"})
        self.assertEqual(status, 200)
        self.assertEqual(self.count(u % "U"), 0)
        self.assertEqual(self.count("SELECT COUNT(*) FROM embeddings WHERE sid NOT IN "
                                    "(SELECT sid FROM sessions)"), 0)
        self.assertEqual(self.count("SELECT COUNT(*) FROM embed_queue WHERE sid NOT IN "
                                    "(SELECT sid FROM sessions)"), 0)
        self.assertGreater(self.count(u % "V"), 0)

    def test_slow_embeddings_do_not_hold_the_request(self):
        self.start("200ms")
        self.first_call("U")
        self.mock.config(embed_delay_ms=10000)
        sent, ctx = self.ask("U", "What is the gate code for the north warehouse?")
        memory = self.recalled(sent)
        # the question's embedding came too late: no relevance leg, the others still there
        self.assertNotIn(GATE, memory)
        self.assertIn(ALLERGY, memory)
        self.assertIn("Tell me a fact about day 8", memory)
        _, _, metrics = self.mp.request("GET", "/metrics")
        self.assertIn('memproxy_recall_lookups_total{result="late"} 1', metrics.decode())
        # the late transfer was dropped, not left running
        wait_for(lambda: self.mock.stats()["embeddings_dropped"] >= 1, timeout=5,
                 what="the late embeddings request to be dropped")

    def test_failing_embeddings_are_retried_and_the_request_goes_on(self):
        self.start("5s")
        self.mock.config(embed_status=500)
        status, _, out = self.mp.request("POST", "/v1/chat/completions", {
            "model": "m", "session_id": "f1", "user_id": "W",
            "messages": [{"role": "user", "content": "Hello there, my name is Robin."}]})
        self.assertEqual(status, 200, out)
        # queued, tried, still queued for a later try
        wait_for(lambda: self.count("SELECT MAX(attempts) FROM embed_queue") or 0, timeout=10,
                 what="a failed try to be counted")
        self.assertEqual(self.count("SELECT COUNT(*) FROM embeddings"), 0)
        self.mock.config(embed_status=0)
        wait_for(lambda: self.count("SELECT COUNT(*) FROM embeddings WHERE vec IS NOT NULL")
                 == 2, timeout=15, what="the retried embeddings")
        self.assertEqual(self.count("SELECT COUNT(*) FROM embed_queue"), 0)


if __name__ == "__main__":
    unittest.main()
