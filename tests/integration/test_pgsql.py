"""PostgreSQL as the store (docs/deploy.md), what only it has: a server that is not there at
start or goes away while memproxy runs, migrations applied once by replicas that start
together, a schema newer than the binary. Each test that stops its server starts a cluster
of its own (tests/pgcluster.py). Runs in the integration-pg suite only."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

from harness import (BACKEND, MEMPROXY_BIN, Memproxy, Mock, PgConnection, pg_database_for,
                     scratch_dir, wait_for)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pgcluster  # noqa: E402

ADMIN = "admin-key-0123456789"
CONFIG = "auth:\n  admin_keys: [%s]\n" % ADMIN


def chat(mp, sid, text):
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    status, _, out = mp.request("POST", "/v1/chat/completions", body, {"X-Session-Id": sid})
    return status, json.loads(out)


def api(mp, method, path):
    return mp.json(method, path, None, {"Authorization": "Bearer " + ADMIN})


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class DatabaseAway(unittest.TestCase):
    """The server stops while memproxy runs: requests are still answered, recorded ones say
    storage_failed (503), REST says 503 and not 404; the server back, all works again and
    what was acknowledged before is there."""

    def setUp(self):
        self.pg = pgcluster.Cluster()
        self.addCleanup(self.pg.stop)
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        url = self.pg.create_db("away")
        self.mp = Memproxy(CONFIG, upstream=self.mock.url, env={"MEMPROXY_DATABASE_URL": url})
        self.addCleanup(self.mp.stop)

    def test_requests_are_answered_and_say_so_and_all_comes_back(self):
        for i in range(3):
            self.assertEqual(chat(self.mp, "kept-%d" % i, "hello %d" % i)[0], 200)
        pgcluster.stop(self.pg.dir, remove=False)
        status, out = chat(self.mp, "kept-0", "while it is away")
        self.assertEqual((status, out["error"]["code"]), (503, "storage_failed"), out)
        status, out = chat(self.mp, "new-call", "nobody remembers this")
        self.assertEqual((status, out["error"]["code"]), (503, "storage_failed"), out)
        status, _, out = self.mp.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": [{"role": "user",
                                                                      "content": "no session"}]})
        self.assertEqual(status, 200, out)  # forwarded, nothing to record
        for path in ("/v1/sessions/kept-1", "/v1/sessions/kept-1/history", "/v1/sessions"):
            status, out = api(self.mp, "GET", path)
            self.assertEqual((status, out["error"]["code"]), (503, "storage_failed"), (path, out))
        self.pg.start()
        wait_for(lambda: chat(self.mp, "kept-0", "it is back")[0] == 200, timeout=30,
                 step=0.2, what="recording to work again")
        status, h = api(self.mp, "GET", "/v1/sessions/kept-0/history")
        self.assertEqual(status, 200, h)
        self.assertEqual([c["content"] for c in h["contents"] if c["role"] == "user"],
                         ["hello 0", "it is back"])
        self.assertEqual(api(self.mp, "GET", "/v1/sessions/new-call")[0], 404)


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class HungUp(unittest.TestCase):
    """The server closed memproxy's connections between two requests (a restart, a
    failover, pg_terminate_backend): the next recorded request goes out on new ones and is
    recorded, not lost to the old connection (memory/pgsql.c, pgsql_notice_hangup). Before,
    the writer found out by failing that request's transaction: a group of several batches
    was then tried again batch by batch, but a request whose recording is one batch (a
    retry, whose reply replaces the last) got a 503 storage_failed."""

    def test_the_next_turn_is_recorded_on_a_new_connection(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(CONFIG, upstream=mock.url)
        self.addCleanup(mp.stop)
        db = PgConnection(mp.pg_url)
        mine = "FROM pg_stat_activity WHERE datname = current_database() AND " \
               "application_name = 'memproxy'"
        for i in range(3):
            self.assertEqual(chat(mp, "call", "question %d" % i)[0], 200)
            pids = [r["pid"] for r in db.execute("SELECT pid " + mine).fetchall()]
            self.assertGreaterEqual(len(pids), 1)
            listed = ", ".join(str(int(p)) for p in pids)
            db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN (%s)"
                       % listed)
            # those backends gone (new ones may come meanwhile: a worker's read connection
            # is made again after a second, the jobs loop's at its next poll)
            wait_for(lambda: db.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE pid IN "
                                        "(%s)" % listed).fetchall()[0]["n"] == 0,
                     timeout=60, what="memproxy's connections to be gone")
            status, out = chat(mp, "call", "question %d" % i)  # a retry: one batch
            self.assertEqual(status, 200, out)
        status, h = api(mp, "GET", "/v1/sessions/call/history")
        self.assertEqual(status, 200, h)
        self.assertEqual([c["content"] for c in h["contents"] if c["role"] == "user"],
                         ["question 0", "question 1", "question 2"])
        self.assertEqual(len(h["contents"]), 6)


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class Start(unittest.TestCase):
    def test_an_unreachable_server_is_waited_for_not_exited_on(self):
        port = pgcluster.free_port()
        d = scratch_dir("unreachable-")
        log = open(os.path.join(d, "log"), "w")
        env = dict(os.environ, MEMPROXY_DATABASE_URL="postgresql://memproxy@127.0.0.1:%d/postgres"
                   % port)
        proc = subprocess.Popen([MEMPROXY_BIN, "--listen", "127.0.0.1:0", "--upstream",
                                 "http://127.0.0.1:9/v1"], stdout=log, stderr=log, env=env)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        out = lambda: open(os.path.join(d, "log")).read()
        wait_for(lambda: "trying again" in out(), timeout=30, what="the retry line")
        self.assertIsNone(proc.poll(), out())
        pg = pgcluster.Cluster(port=port)  # the server comes up on that port
        self.addCleanup(pg.stop)
        wait_for(lambda: "listening on" in out(), timeout=60, step=0.2, what="memproxy to listen")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(30), 0, out())

    def test_replicas_starting_together_migrate_once(self):
        url = pg_database_for(os.path.join(scratch_dir("migrate-"), "m.db"))
        mps = [Memproxy(CONFIG, upstream="http://127.0.0.1:9/v1",
                        env={"MEMPROXY_DATABASE_URL": url}) for _ in range(3)]
        for mp in mps:
            self.addCleanup(mp.stop)
        rows = PgConnection(url).execute("SELECT version FROM memproxy_schema").fetchall()
        self.assertEqual([r[0] for r in rows], [2])
        self.assertEqual(sum("migrated to schema version" in mp.output() for mp in mps), 1)

    def test_an_older_schema_is_migrated(self):
        """A database a version-1 memproxy made (its tables; not yet the merge's functions)
        gains version 2's when a newer one starts on it, once, keeping its rows."""
        url = pg_database_for(os.path.join(scratch_dir("older-"), "o.db"))
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(CONFIG, upstream=mock.url, env={"MEMPROXY_DATABASE_URL": url})
        status, _, out = mp.request("POST", "/v1/chat/completions", {
            "model": "m", "session_id": "old", "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(status, 200, out)
        mp.stop()
        con = PgConnection(url)
        con.execute("DROP FUNCTION memproxy_spoken, memproxy_audio_id")
        con.execute("UPDATE memproxy_schema SET version = 1")
        mp = Memproxy(CONFIG, upstream=mock.url, env={"MEMPROXY_DATABASE_URL": url})
        self.addCleanup(mp.stop)
        self.assertIn("migrated to schema version 2", mp.output())
        self.assertNotIn("migrated to schema version 1", mp.output())
        self.assertEqual(con.execute("SELECT version FROM memproxy_schema").fetchall(), [(2,)])
        self.assertEqual(con.execute("SELECT memproxy_spoken(' **a**  b ')").fetchall(),
                         [("a b",)])
        status, h = api(mp, "GET", "/v1/sessions/old/history")
        self.assertEqual(status, 200, h)
        self.assertEqual([c["content"] for c in h["contents"]][:1], ["hi"])

    def test_a_newer_schema_is_refused(self):
        url = pg_database_for(os.path.join(scratch_dir("newer-"), "n.db"))
        mp = Memproxy(CONFIG, upstream="http://127.0.0.1:9/v1", env={"MEMPROXY_DATABASE_URL": url})
        mp.stop()
        PgConnection(url).execute("UPDATE memproxy_schema SET version = 99")
        r = subprocess.run([MEMPROXY_BIN, "--listen", "127.0.0.1:0", "--upstream",
                            "http://127.0.0.1:9/v1"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MEMPROXY_DATABASE_URL=url))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("schema version 99; this memproxy knows up to 2", r.stderr)


@unittest.skipIf(BACKEND != "postgresql", "PostgreSQL only")
class BehindPgBouncer(unittest.TestCase):
    """Two replicas through PgBouncer 1.18 in transaction pooling, two server connections for
    all their ten: nothing memproxy does may rely on a server session (docs/deploy.md; named
    statements off, as that PgBouncer needs)."""

    CONFIG = CONFIG + """storage:
  prepared_statements: false
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - {name: default, upstream: mock}
  - {name: stored, upstream: mock, history: stored}
"""

    def setUp(self):
        self.pg = pgcluster.Cluster()
        self.addCleanup(self.pg.stop)
        self.pg.create_db("pooled")
        self.bouncer = pgcluster.Bouncer(self.pg, pool_size=2)
        self.addCleanup(self.bouncer.stop)
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        env = {"MEMPROXY_DATABASE_URL": self.bouncer.url + "/pooled"}
        self.reps = [Memproxy(self.CONFIG, upstream=self.mock.url, env=env) for _ in range(2)]
        for mp in self.reps:
            self.addCleanup(mp.stop)

    def test_a_call_round_robin_through_transaction_pooling(self):
        want = []
        for k in range(1, 9):
            self.mock.config(reply="pooled answer %d" % k)
            mp = self.reps[k % 2]
            status, _, out = mp.request(
                "POST", "/p/stored/v1/chat/completions?session_id=pooled-call",
                {"model": "m", "stream": k % 2 == 0,
                 "messages": [{"role": "user", "content": "pooled q %d" % k}]})
            self.assertEqual(status, 200, out)
            sent = json.loads(self.mock.stats()["last_body"])["messages"]
            want.append(("user", "pooled q %d" % k))
            self.assertEqual([(m["role"], m["content"]) for m in sent], want, k)
            want.append(("assistant", "pooled answer %d" % k))
        for mp in self.reps:
            status, h = api(mp, "GET", "/v1/sessions/pooled-call/history")
            self.assertEqual(status, 200, h)
            self.assertEqual([(c["role"], c["content"]) for c in h["contents"]], want)
        self.assertEqual(api(self.reps[0], "POST", "/v1/sessions/pooled-call/stop")[0], 200)
        self.assertEqual(api(self.reps[1], "GET", "/v1/sessions/pooled-call")[1]["status"],
                         "STOPPED")

    def test_calls_at_once_share_two_server_connections(self):
        """Eight calls at once on ten client connections and two server ones: every turn
        recorded once, on either replica."""
        errors = []

        def call(n):
            try:
                for k in range(1, 6):
                    status, _, out = self.reps[(n + k) % 2].request(
                        "POST", "/v1/chat/completions?session_id=busy-%d" % n,
                        {"model": "m", "messages": [{"role": "user",
                                                     "content": "call %d turn %d" % (n, k)}]})
                    if status != 200:
                        errors.append(out[:200])
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        for n in range(8):
            status, h = api(self.reps[n % 2], "GET", "/v1/sessions/busy-%d/history" % n)
            self.assertEqual(status, 200, h)
            self.assertEqual([c["content"] for c in h["contents"] if c["role"] == "user"],
                             ["call %d turn %d" % (n, k) for k in range(1, 6)])


if __name__ == "__main__":
    unittest.main()
