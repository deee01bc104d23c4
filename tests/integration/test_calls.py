"""Voice calls played at random against a model of what must be stored (docs/design.md §3, §6).

Several calls run at once, each in one of three shapes a voice platform sends:
- agora: Agora's custom mode, a sliding window with turn ids on every message and the
  request's own turn_id, a greeting, now and then the platform's silence reminder, and a reply
  cut short coming back as heard with metadata.interrupted and its original;
- openai: a plain OpenAI client resending its whole conversation without turn ids (memproxy
  numbers the turns), a reply cut short coming back as the shorter text the caller heard;
- stored: stored history mode, only the new question each time with the request's turn_id, a
  reply cut short reported with the next question as heard and flagged interrupted.

Each turn is, at random: a stream read to its end, a non-streaming answer, a stream the caller
cuts short (the client hangs up after some tokens and sends the next request at once, on a
new connection, so memproxy may read it before it sees the hang-up), the same with the reply
left out of the next window as never heard (openai), or the platform sending its request
again (agora, stored) and keeping the second answer. The mock answers each request by
its `seed` ("Answer <seed>: ..."), so every call knows the text of each of its replies.

What a user would check, read back over REST at the end: every turn is stored once, with its
turn id, in turn order; a reply the caller heard whole is its text; a reply cut short holds
what was heard, is flagged interrupted, and its original is what was generated: at least what
the client read of the stream (which Agora's client sends as `original`), at most the whole
reply, whichever of the hang-up and the next request memproxy saw first; a reply no one heard
is what memproxy had of it; a retry's row is the second answer; nothing else is stored. The
seeds are fixed; the calls' timing is not, which is the point (the two orders of a barge-in),
so a failure names its call and turn and shows what was stored, and each request the call
sent: when, of what kind, to which replica, and what the client read."""
import json
import random
import threading
import time
import unittest

from harness import (Memproxy, Mock, chat_text, raw_connect, raw_request, read_response,
                     sse_data)

ADMIN = {"Authorization": "Bearer admin-key-0123456789abcdef"}
CONFIG = """
auth:
  admin_keys:
    - {key: admin-key-0123456789abcdef, tenant: default}
upstreams:
  - {name: mock, url: "{upstream}"}
profiles:
  - {name: default, upstream: mock}
  - {name: stored, upstream: mock, history: stored}
"""
REPLY = "one two three four five six seven eight nine ten."
SYSTEM = {"role": "system", "content": "You are a friendly voice assistant."}
GREETING = "Hi, what can I do for you?"
SILENCE = "Are you still there?"


def reply_of(seed):
    return "Answer %d: %s" % (seed, REPLY)


def tokens(text):
    """The mock's tokens: split before each space."""
    out, start = [], 0
    for i in range(1, len(text)):
        if text[i] == " ":
            out.append(text[start:i])
            start = i
    return out + [text[start:]]


class Call:
    """One call: its client's side (what it sends) and the rows it expects stored. A row is
    (turn_id, role, content, source or None, interrupted, original), original being a string,
    None (not interrupted) or a (read, whole) pair: at least read, at most whole."""
    TURNS = 16

    def __init__(self, mps, shape, name, rnd):
        """mps: the memproxy processes (replicas on one database) the call's requests go to,
        each to one at random."""
        self.mps, self.shape, self.name, self.rnd = mps, shape, name, rnd
        self.window, self.pending, self.rows, self.errors = [], [], [], []
        # what was sent where, for a failure's report: (ms since the call began, turn,
        # kind, replica's port, what the client read), a request a line
        self.trace, self.t0 = [], time.monotonic()
        self.ts = 1763800000000
        if shape == "agora":  # the platform greets the caller itself
            self.window.append(self.msg("assistant", GREETING, 1, source="greeting"))
            self.rows.append((1, "assistant", GREETING, "greeting", False, None))

    def msg(self, role, content, turn, **meta):
        self.ts += 1000
        m = {"role": role, "content": content}
        if self.shape == "agora":
            m.update(turn_id=turn, timestamp=self.ts, metadata=dict(meta))
        return m

    def body(self, turn, question, stream, seed):
        b = {"model": "gpt-4o-mini", "stream": stream, "seed": seed}
        if self.shape == "agora":
            b.update(session_id=self.name, turn_id=turn,
                     messages=[SYSTEM] + (self.window + [question])[-16:])
        elif self.shape == "openai":
            b["messages"] = [SYSTEM] + self.window + [question]
        else:
            b.update(turn_id=turn, messages=self.pending + [question])
        return b

    def path(self):
        base = "/p/stored/v1/chat/completions" if self.shape == "stored" else \
            "/v1/chat/completions"
        return base if self.shape == "agora" else base + "?session_id=" + self.name

    def send(self, body, cut=None, kind=""):
        """The reply's text as the client read it: all of it, or its first `cut` tokens (then
        the client hangs up)."""
        port = int(self.rnd.choice(self.mps).port)
        sent = (time.monotonic() - self.t0) * 1000
        got = None
        try:
            got = self.read(port, body, cut)
        except Exception as e:  # in the trace too: the request that failed, and where
            got = e
            raise
        finally:
            self.trace.append("  %8.1f ms %s on :%d, %.1f ms: %s %r" % (
                sent, kind, port, (time.monotonic() - self.t0) * 1000 - sent,
                "failed" if isinstance(got, Exception) else "read", got))
        return got

    def read(self, port, body, cut):
        s = raw_connect(port)
        s.settimeout(120)
        try:
            raw_request(s, self.path(), body)
            f = s.makefile("rb")
            if cut is None:
                status, _, out = read_response(f)
                if status != 200:
                    raise AssertionError("%s: %d %r" % (self.name, status, out[:300]))
                if body["stream"]:
                    return chat_text(sse_data(out.decode()))
                return json.loads(out)["choices"][0]["message"]["content"]
            if int(f.readline().split()[1]) != 200:
                raise AssertionError("%s: a stream refused" % self.name)
            got = ""
            while len(tokens(got)) < cut or got == "":
                line = f.readline().decode()
                if not line:
                    raise AssertionError("%s: the stream ended before token %d" % (self.name, cut))
                if line.startswith("data: {"):
                    got += chat_text([line[6:]])
            return got
        finally:
            s.close()

    def turn(self, k, last):
        t = k + 1 if self.shape == "agora" else k  # the greeting is agora's turn 1
        question = self.msg("user", "Question %d of %s." % (k, self.name), t, source="asr")
        kinds = ["full", "full", "plain", "cut"] + \
            (["retry"] if self.shape != "openai" else ["unheard"])
        kind = "full" if last else self.rnd.choice(kinds)
        seed = self.rnd.randrange(10**9)
        whole = reply_of(seed)
        body = self.body(t, question, kind != "plain", seed)
        if kind in ("cut", "unheard"):
            n = len(tokens(whole))
            read = self.send(body, cut=self.rnd.randrange(2, n - 1),
                             kind="turn %d %s" % (t, kind))
            heard = "".join(tokens(read)[:self.rnd.randrange(1, len(tokens(read)))])
        else:
            got = self.send(body, kind="turn %d %s" % (t, kind))
            if kind == "retry":
                seed = self.rnd.randrange(10**9)
                whole = reply_of(seed)
                body["seed"] = seed
                got = self.send(body, kind="turn %d retried" % t)
            if got != whole:
                self.errors.append("%s turn %d: read %r, the mock sent %r" % (
                    self.name, t, got, whole))
        self.pending = []
        self.rows.append((t, "user", question["content"], None, False, None))
        self.window.append(question)
        if kind == "unheard":  # the caller heard none of it: the window goes on without it
            # flagged interrupted unless memproxy had sent the stream's end before it saw the
            # hang-up: then it is the whole reply, as far as memproxy can know delivered
            self.rows.append((t, "assistant", (read, whole), None, None, (read, whole)))
            return
        if kind != "cut":
            self.rows.append((t, "assistant", whole, None, False, None))
            self.window.append(self.msg("assistant", whole, t, source="llm"))
            if self.shape == "agora" and not last and self.rnd.random() < 0.2:
                self.rows.append((t, "assistant", SILENCE, "silence", False, None))
                self.window.append(self.msg("assistant", SILENCE, t, source="silence"))
            return
        if self.shape == "agora":  # Agora sends what the caller heard and what it was sent
            self.window.append(self.msg("assistant", heard, t, source="llm", interrupted=True,
                                        interrupt_timestamp=self.ts, original=read))
            self.rows.append((t, "assistant", heard, None, True, (read, whole)))
        elif self.shape == "openai":  # the shorter text is all a plain client has
            self.window.append({"role": "assistant", "content": heard})
            self.rows.append((t, "assistant", heard, None, True, (read, whole)))
        else:
            self.pending = [{"role": "assistant", "content": heard,
                             "metadata": {"interrupted": True}}]
            self.rows.append((t, "assistant", heard, None, True, (read, whole)))

    def play(self):
        try:
            for k in range(1, self.TURNS + 1):
                self.turn(k, k == self.TURNS)
        except Exception as e:  # noqa: BLE001 - reported by the test's thread
            self.errors.append("%s: %r\nrequests:\n%s" % (self.name, e, "\n".join(self.trace)))

    @staticmethod
    def within(text, span):
        """Is text at least span's read text and at most its whole reply?"""
        read, whole = span
        return isinstance(text, str) and text.startswith(read) and whole.startswith(text)

    def dump(self, got):
        return "%s, stored:\n%s\n" % (self.name, "\n".join(
            "  turn %s %s %r%s" % (
                c.get("turn_id"), c["role"], c["content"],
                " (interrupted, original %r)" % (c.get("metadata") or {}).get("original")
                if (c.get("metadata") or {}).get("interrupted") else "") for c in got))

    def check_row(self, c, t, role, content, source, cut, original):
        """What is wrong with stored message c (history's format=full) as the row expected."""
        meta = c.get("metadata") or {}
        where = "%s turn %s %s %r" % (self.name, t, role, content)
        if isinstance(content, tuple):  # a reply no one heard: what memproxy had of it
            if not self.within(c["content"], content):
                return ["%s: stored as %r" % (where, c["content"])]
            if cut is None and not meta.get("interrupted"):  # memproxy had sent its end
                cut, original = False, None
                if c["content"] != content[1]:
                    return ["%s: not interrupted, but %r" % (where, c["content"])]
            content, cut = c["content"], True if cut is None else cut
        if (c.get("turn_id"), c["role"], c["content"]) != (t, role, content):
            return ["%s: stored as turn %s %s %r" % (where, c.get("turn_id"), c["role"],
                                                     c["content"])]
        errors = []
        if source is not None and meta.get("source") != source:
            errors.append("%s: source %r" % (where, meta.get("source")))
        if bool(meta.get("interrupted")) != bool(cut):
            errors.append("%s: interrupted %r" % (where, meta.get("interrupted")))
        stored = meta.get("original")
        if isinstance(original, tuple) and not self.within(stored, original):
            errors.append("%s: original %r, read %r of %r" % ((where, stored) + original))
        elif isinstance(original, str) and stored != original:
            errors.append("%s: original %r, expected %r" % (where, stored, original))
        return errors

    def check(self):
        errors = [e for mp in self.mps for e in self.check_on(mp)]
        if errors:  # and what each replica logged of the call (access lines, warnings)
            errors.insert(0, "\n".join(
                ":%s logged:\n%s" % (mp.port, "\n".join(
                    "  " + line for line in mp.output().splitlines()
                    if "session=%s " % self.name in line + " " or
                    "session %s:" % self.name in line))
                for mp in self.mps))
        return errors

    def check_on(self, mp):
        status, _, out = mp.request("GET", "/v1/sessions/%s/history?format=full&limit=1000"
                                         % self.name, headers=ADMIN)
        if status != 200:
            return ["%s: history %d %r" % (self.name, status, out[:200])]
        stored = json.loads(out)["contents"]  # in seq order
        # compared in turn order: a reply whose stream ended after the next request was read
        # (a barge-in's, left out of that window) is recorded after the next question, of its
        # own turn
        got = sorted(stored, key=lambda c: c.get("turn_id") or 0)
        errors = [] if len(got) == len(self.rows) else \
            ["%s: %d rows stored, %d expected" % (self.name, len(got), len(self.rows))]
        for c, row in zip(got, self.rows):
            errors += self.check_row(c, *row)
        if errors:  # the rows first: a failure shows them whatever the count of its errors
            errors.insert(0, self.dump(stored) + "expected:\n" + "\n".join(
                "  turn %s %s %r" % r[:3] for r in self.rows) + "\nrequests:\n" +
                "\n".join(self.trace))
        return errors


class CallsCase:
    """The calls, for a TestCase: REPLICAS memproxy processes on one database (more than one
    on PostgreSQL only, test_replicas.CallsAcrossReplicas), every request sent to one of them
    at random, and every one of them must then serve each call's history as the model has
    it."""
    CALLS = 3  # of each shape, all at once
    REPLICAS = 1
    CONFIG = CONFIG
    TURNS = Call.TURNS  # of each call

    def setUp(self):
        self.mock = Mock()
        self.addCleanup(self.mock.stop)
        self.mock.config(reply=REPLY, seeded=True, token_delay_ms=2)
        self.replicas = []
        for _ in range(self.REPLICAS):
            db = self.replicas[0].db_path if self.replicas else None
            mp = Memproxy(self.CONFIG, upstream=self.mock.url, db=db)
            self.addCleanup(mp.terminate)
            self.replicas.append(mp)

    def play(self, seed):
        rnd = random.Random(seed)
        calls = [Call(self.replicas, shape, "%s-%d-%d" % (shape, seed, i),
                      random.Random(rnd.randrange(2**32)))
                 for i in range(self.CALLS) for shape in ("agora", "openai", "stored")]
        for c in calls:
            c.TURNS = self.TURNS
        threads = [threading.Thread(target=c.play) for c in calls]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        errors = [e for c in calls for e in c.errors]
        if not errors:
            errors = [e for c in calls for e in c.check()]
        if errors:
            self.fail("\n".join(errors[:10]))
        for mp in self.replicas:
            mp.stop()  # exits 0, or raises with its log


class Calls(CallsCase, unittest.TestCase):
    def test_seed_1(self):
        self.play(1)

    def test_seed_2(self):
        self.play(2)


if __name__ == "__main__":
    unittest.main()
