"""The memproxy binary's configuration surface: flags, --check-config, errors, environment."""
import os
import subprocess
import tempfile
import unittest

from harness import MEMPROXY_BIN, USER_HI, Memproxy, Mock, scratch_dir

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "config", "memproxy.example.yaml")


def run(*args, env=None, config=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPROXY_", "OPENAI_"))}
    e.update(env or {})
    if config is not None:
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=scratch_dir("config-"))
        with os.fdopen(fd, "w") as f:
            f.write(config)
        args = ("--config", path) + args
    p = subprocess.run([MEMPROXY_BIN, *args], capture_output=True, text=True, env=e, timeout=10)
    return p.returncode, p.stdout + p.stderr


class Flags(unittest.TestCase):
    def test_version_and_help(self):
        rc, out = run("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^memproxy \d+\.\d+\.\d+")
        rc, out = run("--help")
        self.assertEqual(rc, 0)
        self.assertIn("--check-config", out)
        rc, out = run("--bogus")
        self.assertEqual(rc, 2)

    def test_options_table_lists_every_option(self):
        rc, out = run("--options")
        self.assertEqual(rc, 0)
        for name in ("server.listen", "server.max_body_size", "upstreams[].first_byte_timeout",
                     "profiles[].fallbacks", "auth.client_keys[].tenant"):
            self.assertIn("`%s`" % name, out)

    def test_docs_match_the_options_table(self):
        rc, out = run("--options")
        docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "configuration.md")
        with open(docs) as f:
            self.assertIn(out, f.read(), "docs/configuration.md is out of date: regenerate its "
                          "table with memproxy --options")

    def test_check_config_on_the_example(self):
        secrets = {"MEMPROXY_CLIENT_KEY": "ck-0123456789abcdef", "MEMPROXY_ADMIN_KEY":
                   "ak-0123456789abcdef", "MEMPROXY_WEBHOOK_SECRET": "ws-0123456789abcdef"}
        rc, out = run("--config", EXAMPLE, "--check-config", env=secrets)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok (2 upstream(s), 1 profile(s))", out)
        # the example has no working fallbacks: without its secrets it does not start
        rc, out = run("--config", EXAMPLE, "--check-config")
        self.assertEqual(rc, 2)
        self.assertIn("MEMPROXY_CLIENT_KEY is not set", out)

    def test_weak_secrets_are_refused(self):
        for conf, want in (
                ("auth:\n  client_keys: [change-me-please-1234]\n",
                 "auth.client_keys[0].key is a placeholder"),
                ("auth:\n  admin_keys: [short-key]\n",
                 "auth.admin_keys[0].key is shorter than 16 bytes"),
                ("webhooks:\n  - {url: 'http://127.0.0.1:9/', secret: s3cret}\n",
                 "webhooks[0].secret is shorter than 16 bytes"),
                ("notifications:\n  agora_secret: your-agora-secret\n",
                 "notifications.agora_secret is a placeholder")):
            rc, out = run("--upstream", "http://127.0.0.1:9/v1", "--check-config", config=conf)
            self.assertEqual(rc, 2, conf)
            self.assertIn(want, out)

    def test_no_client_keys_only_on_loopback(self):
        rc, out = run("--upstream", "http://127.0.0.1:9/v1", "--listen", "0.0.0.0:8080",
                      "--check-config")
        self.assertEqual(rc, 2)
        self.assertIn("no client key is configured", out)
        for conf, args in (("auth:\n  open: true\n", ()), ("", ("--listen", "127.0.0.1:8080")),
                           ("auth:\n  client_keys: [ck-0123456789abcdef]\n", ())):
            rc, out = run("--upstream", "http://127.0.0.1:9/v1", "--listen", "0.0.0.0:8080",
                          *args, "--check-config", config=conf)
            self.assertEqual(rc, 0, (conf, out))

    def test_bad_config_names_file_line_and_option(self):
        rc, out = run("--check-config", config="server:\n  listen: 127.0.0.1:1\n  workrs: 2\n")
        self.assertEqual(rc, 2)
        self.assertRegex(out, r"\.yaml:3: server\.workrs: unknown option")

    def test_a_tokenizer_that_cannot_be_read_is_refused(self):
        d = scratch_dir("ranks-")
        dup = os.path.join(d, "dup.tiktoken")
        with open(dup, "w") as f:
            f.write("QQ== 0\nQg== 1\nQQ== 2\n")
        cases = [("tokenizer:\n  file: %s\n" % os.path.join(d, "missing.tiktoken"),
                  "tokenizer.file: %s: No such file or directory" % os.path.join(d, "missing.tiktoken")),
                 ("tokenizer:\n  file: %s\n" % dup,
                  "tokenizer.file: %s:3: these bytes have a rank already" % dup),
                 ("tokenizer:\n  pattern: gpt2\n", "tokenizer.pattern: 'gpt2' must be o200k or cl100k")]
        for config, why in cases:
            rc, out = run("--upstream", "http://127.0.0.1:9/v1", "--check-config", config=config)
            self.assertNotEqual(rc, 0, config)
            self.assertIn(why, out)

    def test_flag_errors_name_the_flag(self):
        rc, out = run("--upstream", "http://127.0.0.1:9/v1", "--workers", "lots", "--check-config")
        self.assertEqual(rc, 2)
        self.assertIn("--workers: server.workers: 'lots' must be a whole number", out)

    def test_no_upstream_is_a_clear_error(self):
        rc, out = run("--check-config")
        self.assertEqual(rc, 2)
        self.assertIn("no upstream configured", out)

    def test_environment(self):
        rc, out = run("--check-config", env={"MEMPROXY_UPSTREAM_URL": "http://127.0.0.1:9/v1"})
        self.assertEqual(rc, 0, out)
        rc, out = run("--check-config", config="upstreams:\n  - {name: a, url: '${MP_X_URL}'}\n",
                      env={"MP_X_URL": "http://h/v1"})
        self.assertEqual(rc, 0, out)
        rc, out = run("--check-config", config="upstreams:\n  - {name: a, url: '${MP_X_URL}'}\n")
        self.assertEqual(rc, 2)
        self.assertIn("MP_X_URL is not set", out)

    def test_port_in_use_is_reported(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        db = os.path.join(scratch_dir("memproxy-"), "m.db")
        rc, out = run("--listen", "127.0.0.1:%d" % mock.port, "--upstream", mock.url, "--db", db)
        self.assertEqual(rc, 1)
        self.assertIn("cannot listen", out)

    def test_unusable_database_is_reported(self):
        rc, out = run("--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9/v1",
                      "--db", "/nonexistent-dir/memproxy.db")
        self.assertEqual(rc, 1)
        self.assertIn("/nonexistent-dir/memproxy.db: cannot open", out)


class EnvironmentKeys(unittest.TestCase):
    def test_env_client_key_and_upstream_key(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(upstream=mock.url, env={"MEMPROXY_CLIENT_KEY": "ck-0123456789abcdef",
                                              "MEMPROXY_UPSTREAM_API_KEY": "uk"})
        self.addCleanup(mp.stop)
        self.assertEqual(mp.request("POST", "/v1/chat/completions", USER_HI)[0], 401)
        status, _, _ = mp.request("POST", "/v1/chat/completions", USER_HI,
                                  {"Authorization": "Bearer ck-0123456789abcdef"})
        self.assertEqual(status, 200)
        self.assertEqual(mock.stats()["last_authorization"], "Bearer uk")
        self.assertNotIn("no client keys configured", mp.output())

    def test_openai_key_goes_only_to_openai(self):
        mock = Mock()
        self.addCleanup(mock.stop)
        mp = Memproxy(upstream=mock.url, env={"OPENAI_API_KEY": "sk-meant-for-openai-only"})
        self.addCleanup(mp.stop)
        self.assertEqual(mp.request("POST", "/v1/chat/completions", USER_HI)[0], 200)
        self.assertIsNone(mock.stats().get("last_authorization"))
        self.assertIn("OPENAI_API_KEY is not sent", mp.output())
        rc, out = run("--upstream", "https://api.openai.com/v1", "--check-config",
                      env={"OPENAI_API_KEY": "sk-meant-for-openai-only"})
        self.assertEqual(rc, 0, out)
        self.assertNotIn("is not sent", out)

    def test_a_key_over_plain_http_is_said(self):
        rc, out = run("--check-config", config="upstreams:\n  - {name: a, url: "
                      "'http://10.1.2.3:8000/v1', api_key: sk-0123456789abcdef}\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("upstreams[0]: its api_key goes to 10.1.2.3 over plain http://", out)


if __name__ == "__main__":
    unittest.main()
