"""PostgreSQL as the store: no read makes a worker's loop wait (docs/deploy.md, "Reads off the
loop"). A table is locked by another database session, so every read of it waits in the
server; with one worker, everything that does not need that table must be answered
meanwhile, and the waiting read must answer once the lock is gone. Before the read pool and
the jobs loop, each of these cases hung its worker until the lock was released, which these
tests only do after the other requests were answered. Runs in the integration-pg suite only."""
import json
import os
import re
import subprocess
import threading
import time
import unittest

from harness import (BACKEND, Memproxy, Mock, PgConnection, pg_database_for, raw_connect,
                     raw_read_until, raw_request, scratch_dir, wait_for)

ADMIN = "admin-key-0123456789"
CONFIG = """auth:
  admin_keys: [%s]
server: {workers: 1}
storage: {statement_timeout: 5m}
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - {name: default, upstream: mock}
  - {name: cached, upstream: mock, cache: true, cache_ttl: 1h}
webhooks:
  - {url: "http://127.0.0.1:9/never", secret: hook-secret-0123456789abcdef}
""" % ADMIN


class Lock:
    """ACCESS EXCLUSIVE on a table, held by a psql session until release()."""

    def __init__(self, url, table):
        self.db = PgConnection(url)
        self.table = table
        self.p = subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        self.p.stdin.write("BEGIN;\nLOCK TABLE %s IN ACCESS EXCLUSIVE MODE;\n" % table)
        self.p.stdin.flush()
        wait_for(lambda: self.locks(True) == 1, what="the lock on " + table)

    def locks(self, granted):
        """Locks on the table granted (the one held) or waited for (the reads it holds)."""
        return self.db.execute(
            "SELECT count(*) AS n FROM pg_locks WHERE relation = ?::regclass AND granted = ?",
            (self.table, granted)).fetchall()[0]["n"]

    def release(self):
        if self.p.poll() is None:
            self.p.stdin.write("COMMIT;\n")
            self.p.stdin.close()
            self.p.wait(60)


class Waiting(threading.Thread):
    """A request on its own thread, for the one that waits on the lock."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn = fn
        self.result = None
        self.start()

    def run(self):
        self.result = self.fn()


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class SlowReads(unittest.TestCase):
    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mp = Memproxy(CONFIG, upstream=self.mock.url)
        self.addCleanup(self.mp.stop)

    def chat(self, sid, text, path="/v1/chat/completions", timeout=60):
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        status, hdrs, out = self.mp.request("POST", path, body, {"X-Session-Id": sid},
                                            timeout=timeout)
        return status, hdrs, json.loads(out)

    def api(self, method, path, timeout=60):
        status, _, out = self.mp.request(method, path, None,
                                         {"Authorization": "Bearer " + ADMIN}, timeout=timeout)
        return status, json.loads(out)

    def lock(self, table):
        lk = Lock(self.mp.pg_url, table)
        self.addCleanup(lk.release)
        return lk

    def answered_meanwhile(self, lk, sid):
        """With a read held by lk: a recorded chat and another REST read are answered."""
        self.assertEqual(self.chat(sid, "while a read waits")[0], 200)
        status, h = self.api("GET", "/v1/sessions/%s/history" % sid)
        self.assertEqual(status, 200, h)
        self.assertEqual([c["content"] for c in h["contents"] if c["role"] == "user"][-1],
                         "while a read waits")
        self.assertGreaterEqual(lk.locks(False), 1)  # and the held read still waits

    def test_a_rest_read_that_waits_holds_no_request(self):
        self.assertEqual(self.chat("first", "hello")[0], 200)
        lk = self.lock("sessions")
        # GET /v1/sessions reads the sessions table: it waits in the server...
        waiting = Waiting(lambda: self.api("GET", "/v1/sessions", timeout=120))
        wait_for(lambda: lk.locks(False) >= 1, what="the list to wait on the lock")
        # ...while an unrecorded chat and /metrics are answered by the only worker
        status, _, out = self.mp.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": [
                                             {"role": "user", "content": "no session"}]},
                                         timeout=60)
        self.assertEqual(status, 200, out)
        self.assertEqual(self.mp.request("GET", "/metrics", timeout=60)[0], 200)
        self.assertTrue(waiting.is_alive())
        lk.release()
        waiting.join(60)
        status, page = waiting.result
        self.assertEqual(status, 200, page)
        self.assertIn("first", [s["id"] for s in page["sessions"]])
        # the pool's reads are timed: the one that waited on the lock took more than 1 ms
        text = self.mp.request("GET", "/metrics")[2].decode()
        fast = int(re.search(r'memproxy_storage_read_wait_seconds_bucket\{le="0.001"\} (\d+)',
                             text).group(1))
        count = int(re.search(r"memproxy_storage_read_wait_seconds_count (\d+)", text).group(1))
        self.assertLess(fast, count)

    def test_deliveries_and_the_webhook_poll_wait_alone(self):
        # the webhook outbox locked: GET /v1/webhooks/deliveries waits, and so does the jobs loop's
        # poll of it (every second with a shared store), which used to run on worker 0
        lk = self.lock("webhook_outbox")
        waiting = Waiting(lambda: self.api("GET", "/v1/webhooks/deliveries", timeout=120))
        wait_for(lambda: lk.locks(False) >= 1, what="a read of the outbox to wait")
        self.answered_meanwhile(lk, "beside-the-outbox")
        lk.release()
        waiting.join(60)
        status, page = waiting.result
        self.assertEqual(status, 200, page)
        self.assertEqual(page["deliveries"], [])

    def test_an_answer_cache_read_that_waits_holds_no_request(self):
        self.mock.config(reply="the cached answer")
        status, hdrs, _ = self.chat("c1", "what is the capital of France?", "/p/cached/v1/chat/completions")
        self.assertEqual((status, hdrs.get("x-memproxy-cache")), (200, "miss"))
        lk = self.lock("answer_cache")
        waiting = Waiting(lambda: self.chat("c2", "what is the capital of France?",
                                            "/p/cached/v1/chat/completions", timeout=120))
        wait_for(lambda: lk.locks(False) >= 1, what="the cache read to wait")
        self.answered_meanwhile(lk, "beside-the-cache")
        lk.release()
        waiting.join(60)
        status, hdrs, out = waiting.result
        self.assertEqual((status, hdrs.get("x-memproxy-cache")), (200, "hit"), out)
        self.assertEqual(out["choices"][0]["message"]["content"], "the cached answer")


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class ReachBack(unittest.TestCase):
    """A turn-id window that reaches back past the working set (memory.session_turns): its
    older turns are read off the loop before the request is reconciled, and matched, not
    stored again."""

    def test_older_turns_are_matched_not_stored_again(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy("memory: {session_turns: 8}\n", upstream=mock.url)
        self.addCleanup(mp.stop)

        def turn(first, last, reply):
            msgs = []
            for t in range(first, last + 1):
                msgs.append({"role": "user", "content": "q%d" % t, "turn_id": t})
                if t < last:
                    msgs.append({"role": "assistant", "content": "a%d" % t, "turn_id": t})
            mock.config(reply=reply)
            status, _, out = mp.request("POST", "/v1/chat/completions",
                                        {"model": "m", "messages": msgs},
                                        {"X-Session-Id": "long"})
            self.assertEqual(status, 200, out)

        for t in range(1, 21):  # a sliding window of four turns
            turn(max(1, t - 3), t, "a%d" % t)

        def reached():
            text = mp.request("GET", "/metrics")[2].decode()
            return int(re.search(r"memproxy_memory_reach_back_turns_total (\d+)", text).group(1))

        self.assertEqual(reached(), 0)
        turn(1, 2, "a2")  # back to turns 1 and 2, long out of the working set
        self.assertEqual(reached(), 4)
        rows = PgConnection(mp.pg_url).execute(
            "SELECT turn_id, role, content FROM messages ORDER BY seq").fetchall()
        self.assertEqual(len(rows), 40)  # matched, not stored again
        self.assertEqual([(r["turn_id"], r["role"], r["content"]) for r in rows[:4]],
                         [(1, "user", "q1"), (1, "assistant", "a1"), (2, "user", "q2"),
                          (2, "assistant", "a2")])


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class LateCheck(unittest.TestCase):
    """A window client's session check (its version, docs/deploy.md) runs while the upstream
    answers, and a reply's end waits for it. When the reply is whole before the check is back
    and the caller hangs up then, the reply is recorded whole once the check is back. It used
    to be recorded from the relay that the hang-up had freed: memproxy crashed (bench/pgsql's
    voice pattern, 2 runs in 3 pinned)."""

    def test_a_caller_who_leaves_while_the_check_waits(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(CONFIG, upstream=mock.url)
        self.addCleanup(mp.stop)
        mock.config(reply="one two three")
        first = [{"role": "user", "content": "first"}]
        status, _, out = mp.request("POST", "/v1/chat/completions",
                                    {"model": "m", "messages": first}, {"X-Session-Id": "late"})
        self.assertEqual(status, 200, out)  # the session's entry is warm now
        lk = Lock(mp.pg_url, "sessions")  # the check's read waits on it
        self.addCleanup(lk.release)
        s = raw_connect(mp.port)
        window = first + [{"role": "assistant", "content": "one two three"},
                          {"role": "user", "content": "second"}]
        raw_request(s, "/v1/chat/completions", {"model": "m", "stream": True, "messages": window},
                    {"X-Session-Id": "late"})
        buf = raw_read_until(s, lambda b: b'"finish_reason":"stop"' in b)
        self.assertNotIn(b"[DONE]", buf)  # the end waits for the check
        s.close()
        wait_for(lambda: "memproxy_client_disconnects_total 1" in
                 mp.request("GET", "/metrics")[2].decode(), what="the hang-up to be seen")
        lk.release()

        def history():
            status, _, out = mp.request("GET", "/v1/sessions/late/history", None,
                                        {"Authorization": "Bearer " + ADMIN})
            h = json.loads(out)
            return h["contents"] if status == 200 and len(h["contents"]) == 4 else None

        turns = wait_for(history, what="the reply to be recorded")
        self.assertEqual([(t["role"], t["content"]) for t in turns],
                         [("user", "first"), ("assistant", "one two three"),
                          ("user", "second"), ("assistant", "one two three")])
        self.assertNotIn("interrupted", turns[3]["metadata"])  # whole: only its end was lost
        self.assertEqual(mp.request("GET", "/metrics")[0], 200)  # and memproxy is still there


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class CheckWait(unittest.TestCase):
    """memproxy_session_check_wait_seconds: how long a recorded response's end waited for its
    session's version check after the reply was whole. The check's read waits on a lock held
    for at least HOLD seconds: the wait shows in the histogram, and the requests whose check
    came first count as 0."""
    HOLD = 0.3

    def hist(self, mp):
        text = mp.request("GET", "/metrics")[2].decode()
        count = re.search(r"^memproxy_session_check_wait_seconds_count (\d+)", text, re.M)
        total = re.search(r"^memproxy_session_check_wait_seconds_sum (\S+)", text, re.M)
        return int(count.group(1)), float(total.group(1))

    def test_the_end_waits_for_the_check_and_says_how_long(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(CONFIG, upstream=mock.url)
        self.addCleanup(mp.stop)
        window = [{"role": "user", "content": "first"}]

        def chat():
            return mp.request("POST", "/v1/chat/completions", {"model": "m", "messages": window},
                              {"X-Session-Id": "checked"}, timeout=120)

        status, _, out = chat()  # cold: read before it goes upstream, no late check
        self.assertEqual(status, 200, out)
        window += [{"role": "assistant", "content": json.loads(out)["choices"][0]["message"][
            "content"]}, {"role": "user", "content": "second"}]
        self.assertEqual(self.hist(mp)[0], 0)
        lk = Lock(mp.pg_url, "sessions")  # the warm session's check waits on it
        self.addCleanup(lk.release)
        waiting = Waiting(chat)
        wait_for(lambda: lk.locks(False) >= 1, what="the check to wait on the lock")
        time.sleep(self.HOLD)
        lk.release()
        waiting.join(120)
        self.assertEqual(waiting.result[0], 200, waiting.result)
        count, total = self.hist(mp)
        self.assertEqual(count, 1)
        self.assertGreaterEqual(total, self.HOLD)


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class Connections(unittest.TestCase):
    """docs/deploy.md's connection math: a replica holds at most server.workers + 2 +
    storage.pool connections (the writer, one non-blocking one per worker, the jobs loop's,
    the read pool's). A serving worker has no blocking connection of its own, so nothing the
    chat path does opens one more, however its session's entry was left: read again after a
    REST change, a turn-id window reaching back past what it holds, stored history."""

    CONFIG = """auth:
  admin_keys: [%s]
server: {workers: 2}
storage: {pool: 1}
memory: {session_turns: 8}
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - {name: default, upstream: mock}
  - {name: stored, upstream: mock, history: stored}
webhooks:
  - {url: "http://127.0.0.1:9/never", secret: hook-secret-0123456789abcdef}
""" % ADMIN

    def test_a_replica_holds_what_the_formula_says(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(self.CONFIG, upstream=mock.url)
        self.addCleanup(mp.stop)
        admin = {"Authorization": "Bearer " + ADMIN}

        def chat(path, sid, messages):
            status, _, out = mp.request("POST", path, {"model": "m", "messages": messages},
                                        {"X-Session-Id": sid})
            self.assertEqual(status, 200, out)
            return json.loads(out)["choices"][0]["message"]["content"]

        window = []
        for i in range(12):  # turn ids, a window longer than the entry keeps
            window.append({"role": "user", "content": "q%d" % i, "turn_id": i + 1})
            reply = chat("/v1/chat/completions", "win", window)
            window.append({"role": "assistant", "content": reply, "turn_id": i + 1})
            chat("/p/stored/v1/chat/completions", "stored", [{"role": "user", "content": "s%d" % i}])
            if i % 3 == 1:  # a REST change: each entry is read again by its next request
                for sid in ("win", "stored"):
                    status, _, out = mp.request("PATCH", "/v1/sessions/" + sid,
                                                {"labels": {"round": str(i)}}, admin)
                    self.assertEqual(status, 200, out)
        for sid in ("win", "stored"):
            status, _, out = mp.request("GET", "/v1/sessions/%s/history" % sid, None, admin)
            self.assertEqual(status, 200, out)
            turns = json.loads(out)["contents"]
            self.assertEqual(len(turns), 24, [t["content"] for t in turns])  # each turn once
        metrics = mp.request("GET", "/metrics")[2].decode()
        reached = re.search(r"^memproxy_memory_reach_back_turns_total (\d+)", metrics, re.M)
        self.assertGreater(int(reached.group(1)), 0)  # the window did reach back
        name = mp.pg_url.rsplit("/", 1)[1]
        held = PgConnection(mp.pg_url).execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = ? AND "
            "application_name = 'memproxy'", (name,)).fetchall()[0]["n"]
        self.assertGreaterEqual(held, 3)  # the writer, a worker's pipeline, the pool's (REST)
        self.assertLessEqual(held, 2 + 2 + 1)


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class SlowLookup(unittest.TestCase):
    """storage.url names its server: libpq would look the name up on the worker's loop each
    time the worker's read connection is made again, so memproxy looks it up on a thread of
    its own first (memory/pgsql_resolve.h). tests/integration/slowdns.c stands in for the
    resolver: while a hold file exists, a lookup of the name waits, and says from which
    thread. With the lookup on the loop, the request below hung until the hold went."""

    NAME = "memproxy-db.test"

    def test_a_lookup_that_hangs_holds_no_request(self):
        shim = os.environ.get("MEMPROXY_TEST_SLOWDNS")
        if not shim:
            self.skipTest("MEMPROXY_TEST_SLOWDNS (meson sets it) names tests/integration/slowdns.c")
        hold = os.path.join(scratch_dir("slowdns-"), "hold")
        url = pg_database_for(hold).replace("127.0.0.1", self.NAME)
        asan = os.environ.get("ASAN_OPTIONS", "")
        env = {"MEMPROXY_DATABASE_URL": url, "LD_PRELOAD": shim, "SLOWDNS_NAME": self.NAME,
               "SLOWDNS_HOLD": hold,  # ASan's runtime is not first with a library preloaded
               "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(CONFIG, upstream=mock.url, env=env)
        self.addCleanup(mp.stop)
        self.addCleanup(lambda: os.path.exists(hold) and os.unlink(hold))  # before the stop
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        status, _, out = mp.request("POST", "/v1/chat/completions", body, {"X-Session-Id": "a"})
        self.assertEqual(status, 200, out)  # connected through the name

        open(hold, "w").close()
        db = PgConnection(pg_database_for(hold))
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                   "datname = current_database() AND application_name = 'memproxy'")
        entered = hold + ".entered"
        wait_for(lambda: os.path.exists(entered) and "pg-lookup" in open(entered).read(),
                 timeout=60, what="the worker's read connection to look its server up")
        status, _, out = mp.request("POST", "/v1/chat/completions", body, timeout=60)
        self.assertEqual(status, 200, out)  # not recorded: answered while the lookup hangs
        self.assertTrue(json.loads(out)["choices"][0]["message"]["content"])
        self.assertTrue(os.path.exists(hold))  # ... and it still hung meanwhile

        os.unlink(hold)
        wait_for(lambda: "read connection is back" in mp.output(), timeout=60,
                 what="the read connection to come back")
        status, _, out = mp.request("POST", "/v1/chat/completions", body, {"X-Session-Id": "a"},
                                    timeout=60)
        self.assertEqual(status, 200, out)
        status, _, out = mp.request("GET", "/v1/sessions/a/history", None,
                                    {"Authorization": "Bearer " + ADMIN})
        self.assertEqual(status, 200, out)
        self.assertEqual(len(json.loads(out)["contents"]), 2)  # the retry: one turn, one reply


if __name__ == "__main__":
    unittest.main()
