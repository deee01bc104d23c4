"""Replicas (docs/deploy.md): three memproxy processes on one PostgreSQL database, a voice
call whose requests go round-robin across them, a stop, and one of them killed with SIGKILL
mid-stream. Runs in the integration-pg suite only (tests/meson.build): replicas need a
database that several processes share."""
import json
import os
import signal
import threading
import time
import unittest

from harness import (BACKEND, Memproxy, Mock, PgConnection, chat_text, db_connect,
                     pg_database_for, raw_connect, raw_request, scratch_dir, sse_data, wait_for)
import test_calls
from test_calls import CallsCase
from test_recording import (SPOKEN_REPLY, Q1, audio_by_reference_read_first, barge_in_keeps_thinking,
                            barge_in_read_first, db_rows, heard_then_q2)
from test_lifecycle import Receiver
from test_sweep import SweepCase

ADMIN = {"Authorization": "Bearer admin-0123456789abcdef"}
CALL = "room-7-agent"
TURNS = 40
CUT = 10  # the reply the caller interrupts

CONFIG = """
auth:
  admin_keys: [admin-0123456789abcdef]
storage:
  lease: 2s
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - name: default
    upstream: mock
    summarize: true
    summary_wait: 10s
  - name: stored
    upstream: mock
    history: stored
webhooks:
  - {url: "%s", secret: s3cret-0123456789abcdef, backoff: 200ms, timeout: 30s}
"""


class SlowReceiver(Receiver):
    """A webhook receiver that can hold its answers (a delivery stays in flight)."""

    def __init__(self):
        super().__init__()
        self.hold = threading.Event()
        self.hold.set()
        handler = self.server.RequestHandlerClass
        outer = self
        post = handler.do_POST

        def do_post(h):
            outer.hold.wait(60)
            post(h)

        handler.do_POST = do_post


def user(k):
    return {"role": "user", "content": "Question %d, please." % k, "turn_id": k,
            "timestamp": 1763800000000 + 1000 * k,
            "metadata": {"source": "asr", "user": "1002"}}


def answer(k):
    return "Answer %d: of course." % k


@unittest.skipIf(BACKEND != "postgresql", "replicas share a PostgreSQL database")
class Replicas(unittest.TestCase):
    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.recv = SlowReceiver()
        self.addCleanup(self.recv.stop)
        self.url = pg_database_for(os.path.join(scratch_dir("replicas-"), "shared.db"))
        self.mock.config(summaries=True)
        self.reps = [self.start() for _ in range(3)]
        self.window = [{"role": "system", "content": "You are a friendly voice assistant."}]

    def start(self):
        mp = Memproxy(CONFIG % self.recv.url, upstream=self.mock.url,
                      env={"MEMPROXY_DATABASE_URL": self.url})
        self.addCleanup(lambda: mp.proc.poll() is None and mp.stop())
        return mp

    def body(self, k):
        return {"model": "gpt-4o-mini", "stream": True, "session_id": CALL, "user_uid": "1002",
                "turn_id": k, "messages": self.window[:1] + self.window[-16:]}

    def turn(self, k, mp):
        """Turn k on replica mp: the caller's question, the streamed answer, kept in the
        client's window as heard."""
        self.window.append(user(k))
        self.mock.config(reply=answer(k), token_delay_ms=0)
        status, hdrs, out = mp.request("POST", "/v1/chat/completions", self.body(k))
        self.assertEqual(status, 200, out)
        self.assertEqual(chat_text(sse_data(out.decode())), answer(k))
        heard = {"role": "assistant", "content": answer(k), "turn_id": k,
                 "timestamp": 1763800000500 + 1000 * k, "metadata": {"source": "llm"}}
        if k == CUT:  # the caller barged in: the reply comes back as far as it was heard
            heard["content"] = "Answer %d:" % k
            heard["metadata"].update(interrupted=True, interrupt_timestamp=heard["timestamp"],
                                     original=answer(k))
        self.window.append(heard)

    def history(self, mp, sid=CALL):
        status, h = mp.json("GET", "/v1/sessions/%s/history" % sid, headers=ADMIN)
        self.assertEqual(status, 200, h)
        return h["contents"]

    def assert_whole_call(self, mp, upto):
        contents = self.history(mp)
        got = [(c["turn_id"], c["role"], c["content"]) for c in contents]
        want = []
        for k in range(1, upto + 1):
            want += [(k, "user", "Question %d, please." % k),
                     (k, "assistant", "Answer %d:" % k if k == CUT else answer(k))]
        self.assertEqual(got, want)  # each turn once, in order, on this replica
        cut = contents[2 * CUT - 1]
        self.assertEqual(cut["metadata"]["interrupted"], True)
        self.assertEqual(cut["metadata"]["original"], answer(CUT))

    def test_a_call_round_robin_a_stop_and_a_replica_killed(self):
        # 1. the first 24 turns, each on the next replica
        for k in range(1, 25):
            self.turn(k, self.reps[k % 3])
        for mp in self.reps:
            self.assert_whole_call(mp, 24)
        self.sdk_call()
        self.stored_call()

        # 2. another call stops; its dump's delivery hangs at the receiver: in flight on one
        #    replica, which is then killed mid-stream of turn 25
        self.recv.hold.clear()
        status, _, out = self.reps[0].request(
            "POST", "/v1/chat/completions",
            {"model": "m", "session_id": "side", "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(status, 200, out)
        status, _ = self.reps[0].json("POST", "/v1/sessions/side/stop", headers=ADMIN)
        self.assertEqual(status, 200)
        con = self.db()
        owner = wait_for(lambda: self.owner(con, "side"), timeout=30, what="the dump's owner")
        victim = next(mp for mp in self.reps if mp.proc.pid == owner)
        survivors = [mp for mp in self.reps if mp is not victim]

        self.window.append(user(25))
        self.mock.config(reply=answer(25), token_delay_ms=200)
        s = raw_connect(victim.port)
        raw_request(s, "/v1/chat/completions", self.body(25))
        first = s.recv(4096)
        self.assertIn(b"200", first.split(b"\r\n", 1)[0])
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        s.close()
        self.window.pop()

        # 3. no acknowledged turn is lost, and the killed replica's delivery goes out from
        #    another once its lease ran out, with the same notice id
        self.recv.hold.set()
        wait_for(lambda: len(self.side_dumps()) >= 2, timeout=60,
                 what="the side dump delivered again by another replica")
        self.assertEqual(len({d["noticeId"] for d in self.side_dumps()}), 1)
        for mp in survivors:
            contents = self.history(mp)
            self.assertGreaterEqual(len(contents), 48)
            self.assertEqual(contents[:48], self.history(survivors[0])[:48])

        # 4. the call goes on on the others (the platform retries turn 25 elsewhere)
        for k in range(25, TURNS + 1):
            self.turn(k, survivors[k % 2])
        for mp in survivors:
            self.assert_whole_call(mp, TURNS)

        # 5. a stop sent to one replica: one dump (one notice id, delivered at least once)
        #    holding all 80 turns, and one summary
        before = self.mock.stats()["chat_requests"]
        status, _ = survivors[0].json("POST", "/v1/sessions/%s/stop" % CALL, headers=ADMIN)
        self.assertEqual(status, 200)
        wait_for(lambda: self.call_dumps(), timeout=30, what="the call's dump")
        time.sleep(3)  # longer than a lease: a second dump or summary would show by now
        dumps = self.call_dumps()
        self.assertEqual(len({d["noticeId"] for d in dumps}), 1)
        self.assertEqual(len(dumps[0]["payload"]["contents"]), 2 * TURNS)
        self.assertIn("summary", dumps[0]["payload"])
        self.assertEqual(self.mock.stats()["chat_requests"] - before, 1)  # the summary
        status, mem = survivors[1].json("GET", "/v1/users/1002/memory", headers=ADMIN)
        self.assertEqual(status, 200)
        self.assertIn("Question 40", mem["summary"]["text"])

    def sdk_call(self):
        """An OpenAI SDK's call: no turn ids, the whole conversation every time, each request
        on the next replica. Matched by content alone, so a replica must see what the others
        wrote since it last held the session (its version), or it stores them again."""
        msgs = [{"role": "system", "content": "Be brief."}]
        for k in range(1, 13):
            msgs.append({"role": "user", "content": "sdk question %d" % k})
            self.mock.config(reply="sdk answer %d" % k, token_delay_ms=0)
            status, _, out = self.reps[k % 3].request(
                "POST", "/v1/chat/completions?session_id=sdk-call",
                {"model": "m", "messages": msgs})
            self.assertEqual(status, 200, out)
            msgs.append(json.loads(out)["choices"][0]["message"])
        for mp in self.reps:
            got = [(c["role"], c["content"]) for c in self.history(mp, "sdk-call")]
            self.assertEqual(got, [(m["role"], m["content"]) for m in msgs[1:]])

    def stored_call(self):
        """A client that keeps no state (history: stored): each request brings only its new
        message and memproxy sends the upstream the call so far. Round-robin, a replica's
        working set must not stand in for turns another replica wrote since."""
        want = []
        for k in range(1, 10):
            self.mock.config(reply="stored answer %d" % k, token_delay_ms=0)
            status, _, out = self.reps[k % 3].request(
                "POST", "/p/stored/v1/chat/completions?session_id=stored-call",
                {"model": "m", "messages": [{"role": "user", "content": "stored q %d" % k}]})
            self.assertEqual(status, 200, out)
            sent = json.loads(self.mock.stats()["last_body"])["messages"]
            want.append(("user", "stored q %d" % k))
            self.assertEqual([(m["role"], m["content"]) for m in sent], want, k)
            want.append(("assistant", "stored answer %d" % k))

    # ---- helpers over the receiver and the database ----

    def db(self):
        return PgConnection(self.url)

    def owner(self, con, sid):
        row = con.execute("SELECT lease_owner FROM webhook_outbox WHERE session_id = ?",
                          (sid,)).fetchone()
        return int(row[0].rsplit("-", 1)[1]) if row and row[0] else None

    def dumps_of(self, sid):
        return [json.loads(b) for _, b in self.recv.dumps()
                if json.loads(b)["payload"]["agent_id"] == sid]

    def side_dumps(self):
        return self.dumps_of("side")

    def call_dumps(self):
        return self.dumps_of(CALL)


class ReplicaSweep(SweepCase, unittest.TestCase):
    """test_sweep's random sweep over two replicas on one database, each request to either:
    besides its own checks, both serve the same history of every session at the end."""
    REPLICAS = 2

    def test_seed_3(self):
        self.sweep(3)


class BargeInAcrossReplicas(unittest.TestCase):
    """A caller barges in while a reply streams from one replica, and the platform's next
    request (the reply as heard, flagged, and the new question) reaches the other replica
    before the first sees the hang-up: the second stores the heard part, the first then
    records the reply under the same (turn_id, role, turn_idx), and the two are one row,
    heard as content, generated as original (test_recording.BargeInReadFirst's case, across
    replicas; the reply's insert was dropped before the merge)."""

    def two_replicas(self):
        """A slow-streaming mock and two replicas on one database."""
        mock = Mock("--token-delay-ms", "20")
        self.addCleanup(mock.stop)
        a = Memproxy(upstream=mock.url)
        self.addCleanup(a.terminate)
        b = Memproxy(upstream=mock.url, db=a.db_path)
        self.addCleanup(b.terminate)
        return mock, a, b

    def test_the_reply_and_its_heard_part_are_one_row(self):
        barge_in_read_first(self, *self.two_replicas(), timeout=30)

    def test_the_heard_part_as_spoken(self):
        """The heard part as the platform's text-to-speech said it (base/spoken.h): the SQL
        merge compares the two as spoken, as reconcile does in one process."""
        barge_in_read_first(self, *self.two_replicas(), timeout=30, reply=SPOKEN_REPLY)

    def test_nothing_heard(self):
        """The caller barged in before the first word: the heard row is empty."""
        barge_in_read_first(self, *self.two_replicas(), timeout=30, heard="")

    def test_an_audio_reply_by_reference(self):
        """The heard row a copy of the reply's audio by reference (no text): the SQL merge
        takes the reply as recorded, as memory_same_audio does in one process
        (PGSQL_SAME_AUDIO), not as a reply heard as nothing."""
        audio_by_reference_read_first(self, *self.two_replicas(), timeout=30)

    def test_the_reply_keeps_its_thinking(self):
        """The merged row keeps the reply's metadata (a reasoning model's thinking), not the
        heard row's, as the reply's row replaces it in one process."""
        barge_in_keeps_thinking(self, *self.two_replicas(), timeout=30)


class AudioCopyAfterItsReply(unittest.TestCase):
    """The other order of BargeInAcrossReplicas' audio case: replica a has recorded an audio
    reply, and replica b, whose working set predates it, stores the platform's copy of it by
    reference (audio: {id}, no text) under the same key. Here b's view is kept stale by
    putting the session's version back to what b last wrote (as another replica's commit
    that b has not checked for yet). The copy changes nothing: the reply keeps its
    transcript, not interrupted."""

    def test_the_reply_keeps_its_transcript(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        a = Memproxy(upstream=mock.url)
        self.addCleanup(a.terminate)
        b = Memproxy(upstream=mock.url, db=a.db_path)
        self.addCleanup(b.terminate)
        u = lambda k: {"role": "user", "content": "q%d" % k, "turn_id": k}
        said = {"role": "assistant", "content": "Hello.", "turn_id": 1}

        def ask(mp, messages):
            status, _, out = mp.request("POST", "/v1/chat/completions", {
                "model": "m", "session_id": "late", "messages": messages})
            self.assertEqual(status, 200, out)
            return json.loads(out)["choices"][0]["message"]

        mock.config(reply="Hello.")
        ask(b, [u(1)])
        con = db_connect(a.db_path)
        version = con.execute("SELECT version FROM sessions WHERE id = 'late'").fetchone()[0]
        mock.config(audio=True, reply="It is sunny in Oslo today.")
        audio_id = ask(a, [u(1), said, u(2)])["audio"]["id"]
        con.execute("UPDATE sessions SET version = ? WHERE id = 'late'", (version,))
        mock.config(audio=False, reply="Bring a jacket.")
        ask(b, [u(1), said, u(2), {"role": "assistant", "audio": {"id": audio_id},
                                   "turn_id": 2}, u(3)])
        rows = db_rows(a.db_path, "late")
        self.assertEqual([(r["turn_id"], r["role"], r["content"]) for r in rows], [
            (1, "user", "q1"), (1, "assistant", "Hello."), (2, "user", "q2"),
            (2, "assistant", "It is sunny in Oslo today."), (3, "user", "q3"),
            (3, "assistant", "Bring a jacket.")])
        reply = rows[3]
        self.assertEqual((reply["interrupted"], reply["original"]), (0, None))
        self.assertIsNotNone(reply["latency_us"])
        self.assertEqual(json.loads(reply["metadata"])["audio"]["id"], audio_id)


class ReplicaCalls(CallsCase):
    """test_calls' voice calls, every request sent to one of two replicas at random: no
    sticky routing. The barge-ins are where replicas race: the caller hangs up a stream on
    one replica and the platform's next request reaches the other at once, before the first
    has recorded the reply, sometimes before its question is committed. 27 calls of each
    shape at once: the races that matter (a request recorded after the next ones) come with
    load, and a seed's timing is not fixed, so ten seeds in two cases. A stored-mode heard
    part waits for its turn as long as the option allows, so that a busy machine's slow
    commits change no outcome (past the wait it is not recorded: HeardPartOfATurnNotHere)."""
    REPLICAS = 2
    CALLS = 27
    CONFIG = test_calls.CONFIG + "storage:\n  replica_wait: 10s\n"


class CallsAcrossReplicas(ReplicaCalls, unittest.TestCase):
    def test_seed_1(self):
        self.play(1)

    def test_seed_2(self):
        self.play(2)

    def test_seed_3(self):
        self.play(3)

    def test_seed_4(self):
        self.play(4)

    def test_seed_5(self):
        self.play(5)


class CallsAcrossReplicasMore(ReplicaCalls, unittest.TestCase):
    def test_seed_6(self):
        self.play(6)

    def test_seed_7(self):
        self.play(7)

    def test_seed_8(self):
        self.play(8)

    def test_seed_9(self):
        self.play(9)

    def test_seed_10(self):
        self.play(10)


class CallsLongerThanTheWorkingSet(ReplicaCalls, unittest.TestCase):
    """The same with calls of 30 turns and a working set of 8 messages (memory.session_turns):
    a whole-conversation client's window then begins before what a replica holds of the call.
    When such a request was recorded after the next ones, its window lay inside the stored
    turns but began before the working set's first: nothing matched, and the whole window was
    stored again (up to 53 rows too many in a call; about half the runs of these seeds)."""
    CALLS = 6
    TURNS = 30
    CONFIG = ReplicaCalls.CONFIG + "memory: {session_turns: 8}\n"

    def test_seed_1(self):
        self.play(1)

    def test_seed_2(self):
        self.play(2)

    def test_seed_3(self):
        self.play(3)


def stored_replicas(test, config, count=2):
    """count memproxy processes on one database and the mock they share, answering
    "w0 w1 w2 w3", all stopped when test ends."""
    mock = Mock()
    test.addCleanup(mock.stop)
    mock.config(reply="w0 w1 w2 w3")
    mps = []
    for _ in range(count):
        mp = Memproxy(config, upstream=mock.url, db=mps[0].db_path if mps else None)
        test.addCleanup(mp.terminate)
        mps.append(mp)
    return mps


class HeardPartWaitsForItsTurn(unittest.TestCase):
    """Stored history mode across replicas: the caller barges in on a reply streaming from
    replica a, and the platform's next request (what was heard, then the new question)
    reaches b before a has committed the turn that reply is of. b waits for that turn
    (storage.replica_wait) and records the heard part as the reply's, after its question.
    Recorded at once, the heard part went to the turn b had, or none, before the question,
    which a then stored after the next one. Here a commits turn 1 only after b has read
    request 2, however slow the machine: a is sent turn 1 then."""

    CONFIG = """
storage:
  replica_wait: 10s
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - {name: stored, upstream: mock, history: stored}
"""
    PATH = "/p/stored/v1/chat/completions?session_id=held"

    def test_the_heard_part_lands_after_its_question(self):
        a, b = stored_replicas(self, self.CONFIG)
        answer = {}
        second = threading.Thread(target=lambda: answer.update(zip(
            ("status", "headers", "body"), b.request("POST", self.PATH, {
                "model": "m", "turn_id": 2, "messages": [
                    {"role": "assistant", "content": "w0 w1",
                     "metadata": {"interrupted": True}},
                    {"role": "user", "content": "q2"}]}, timeout=60))))
        second.start()
        time.sleep(0.3)  # b has read request 2 and found no turn 1
        self.assertTrue(second.is_alive(), answer)
        status, _, out = a.request("POST", self.PATH, {
            "model": "m", "turn_id": 1, "messages": [{"role": "user", "content": "q1"}]})
        self.assertEqual(status, 200, out)
        second.join(60)
        self.assertEqual(answer.get("status"), 200, answer)
        rows = db_rows(a.db_path, "held")
        self.assertEqual([(r["turn_id"], r["role"], r["content"]) for r in rows], [
            (1, "user", "q1"), (1, "assistant", "w0 w1"), (2, "user", "q2"),
            (2, "assistant", "w0 w1 w2 w3")])
        self.assertEqual(rows[1]["interrupted"], 1)
        self.assertEqual(rows[1]["original"], "w0 w1 w2 w3")


class HeardPartOfATurnNotHere(unittest.TestCase):
    """The same as HeardPartWaitsForItsTurn, but b gives up waiting at once (replica_wait: 0,
    as when the other replica's commit takes longer than the wait: an overloaded database).
    b's newest turn is then the one before: a reply the heard part begins as well, as every
    reply of the mock does. The heard part must not become that older reply's content; b
    records its question alone, and turn 2's reply is recorded by a as it was generated."""

    CONFIG = HeardPartWaitsForItsTurn.CONFIG.replace("10s", "0s")
    PATH = HeardPartWaitsForItsTurn.PATH

    def test_an_older_reply_keeps_its_text(self):
        a, b = stored_replicas(self, self.CONFIG)
        for mp, turn, messages in (
                (a, 1, [{"role": "user", "content": "q1"}]),
                (b, 3, [{"role": "assistant", "content": "w0 w1",
                         "metadata": {"interrupted": True}}, {"role": "user", "content": "q3"}]),
                (a, 2, [{"role": "user", "content": "q2"}])):
            status, _, out = mp.request("POST", self.PATH, {
                "model": "m", "turn_id": turn, "messages": messages})
            self.assertEqual(status, 200, out)
        rows = sorted(db_rows(a.db_path, "held"), key=lambda r: (r["turn_id"], r["seq"]))
        self.assertEqual([(r["turn_id"], r["role"], r["content"], r["interrupted"])
                          for r in rows], [
            (1, "user", "q1", 0), (1, "assistant", "w0 w1 w2 w3", 0),
            (2, "user", "q2", 0), (2, "assistant", "w0 w1 w2 w3", 0),
            (3, "user", "q3", 0), (3, "assistant", "w0 w1 w2 w3", 0)])

    def test_turn_ids_that_skip_a_number(self):
        """A platform numbering turns 1, 3, 5: "the turn before the request's" is none, so
        the heard part is of the newest turn, which the replica has: it is recorded there."""
        a, = stored_replicas(self, self.CONFIG, 1)
        for turn, messages in (
                (1, [{"role": "user", "content": "q1"}]),
                (3, [{"role": "user", "content": "q3"}]),
                (5, [{"role": "assistant", "content": "w0 w1",
                      "metadata": {"interrupted": True}}, {"role": "user", "content": "q5"}])):
            status, _, out = a.request("POST", self.PATH, {
                "model": "m", "turn_id": turn, "messages": messages})
            self.assertEqual(status, 200, out)
        rows = db_rows(a.db_path, "held")
        self.assertEqual([(r["turn_id"], r["role"], r["content"], r["interrupted"])
                          for r in rows], [
            (1, "user", "q1", 0), (1, "assistant", "w0 w1 w2 w3", 0),
            (3, "user", "q3", 0), (3, "assistant", "w0 w1", 1),
            (5, "user", "q5", 0), (5, "assistant", "w0 w1 w2 w3", 0)])
        self.assertEqual(rows[3]["original"], "w0 w1 w2 w3")


class ChangeByKey(unittest.TestCase):
    """A replica numbers a session's new rows from what it holds; another replica that wrote
    the session meanwhile may hold that number already, and then the database gives the row
    the next free one. A later change of that row (a heard part's update) must still reach it,
    not the row that holds the number the replica knows it by. Here the database is renumbered
    behind the replica's back, as the other replica's insert would have numbered it (a silence
    prompt of the same turn holds the reply's seq), and the version left as it was, so that
    the replica goes by what it holds."""

    def test_a_heard_part_updates_its_reply_however_numbered(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(upstream=mock.url)
        self.addCleanup(mp.terminate)
        mock.config(reply="w0 w1 w2 w3")
        status, _, out = mp.request("POST", "/v1/chat/completions", {
            "model": "m", "session_id": "keyed", "messages": [Q1]})
        self.assertEqual(status, 200, out)
        reply = db_rows(mp.db_path, "keyed")[1]
        con = db_connect(mp.db_path)
        con.execute("UPDATE messages SET seq = seq + 1 WHERE sid = ? AND seq = ?",
                    (reply["sid"], reply["seq"]))
        con.execute("INSERT INTO messages(sid, seq, turn_id, turn_idx, role, content, source, "
                    "timestamp_ms, importance) "
                    "VALUES (?, ?, 1, 1, 'assistant', ?, 'silence', 0, 0.5)",
                    (reply["sid"], reply["seq"], "are you there?"))
        heard_then_q2(self, mp, "keyed", "w0 w1")
        rows = db_rows(mp.db_path, "keyed")
        self.assertEqual([(r["turn_id"], r["role"], r["content"], r["original"]) for r in rows], [
            (1, "user", "q1", None), (1, "assistant", "are you there?", None),
            (1, "assistant", "w0 w1", "w0 w1 w2 w3"), (2, "user", "q2", None),
            (2, "assistant", "w0 w1 w2 w3", None)])


if __name__ == "__main__":
    unittest.main()
