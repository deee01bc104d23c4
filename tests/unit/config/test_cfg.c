/* Unit tests: configuration loading, errors and validation (config/cfg.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/tiktoken.h"
#include "base/util.h"
#include "config/cfg.h"
#include "config/cfgcheck.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *example_path;

static char *write_tmp(const char *text)
{
    char *path = xstrdup("/tmp/memproxy-cfg-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Load text; return the validated config, or NULL with the error in *err. */
static struct cfg *load(const char *text, char **err)
{
    char *path = write_tmp(text);
    *err = NULL;
    struct cfg *cfg = cfg_load(path, err);
    if (cfg != NULL && cfgcheck_validate(cfg, err) != 0) {
        cfg_destroy(cfg);
        cfg = NULL;
    }
    unlink(path);
    free(path);
    return cfg;
}

static void expect_error(const char *text, const char *want)
{
    char *err = NULL;
    struct cfg *cfg = load(text, &err);
    assert_null(cfg);
    assert_non_null(err);
    if (strstr(err, want) == NULL)
        fail_msg("error '%s' does not contain '%s'", err, want);
    free(err);
}

static void test_defaults(void **state)
{
    struct cfg *cfg = cfg_defaults();
    assert_string_equal(cfg->listen, "127.0.0.1:8080");
    assert_int_equal(cfg->max_body_size, 4 * 1024 * 1024);
    assert_int_equal(cfg->client_timeout_ms, 60000);
    assert_true(cfg->metrics_enabled);
    char *err = NULL;
    assert_int_equal(cfgcheck_validate(cfg, &err), -1); /* no upstream */
    assert_non_null(strstr(err, "no upstream configured"));
    free(err);
    cfgcheck_set_upstream_url(cfg, "http://127.0.0.1:9/v1/");
    assert_int_equal(cfgcheck_validate(cfg, &err), 0);
    assert_string_equal(cfg->upstreams[0].url, "http://127.0.0.1:9/v1"); /* slash trimmed */
    assert_int_equal(cfg->nprofiles, 1);
    assert_string_equal(cfg->profiles[0].name, "default");
    cfg_destroy(cfg);
}

static void test_full_config(void **state)
{
    char *err = NULL;
    setenv("MP_TEST_KEY", "sk-from-env", 1);
    struct cfg *cfg = load("server:\n"
                           "  listen: 0.0.0.0:9000\n"
                           "  workers: 3\n"
                           "  max_body_size: 512KiB\n"
                           "  client_timeout: 1500ms\n"
                           "auth:\n"
                           "  client_keys:\n"
                           "    - plain-key-0123456789\n"
                           "    - {key: k2-0123456789abcdef, tenant: acme}\n"
                           "upstreams:\n"
                           "  - name: a\n"
                           "    url: http://a/v1\n"
                           "    api_key: ${MP_TEST_KEY}\n"
                           "    first_byte_timeout: 2m\n"
                           "  - {name: b, url: 'https://b/v1', api_key: '${MP_UNSET_VAR:-dflt}'}\n"
                           "profiles:\n"
                           "  - {name: x, upstream: b}\n"
                           "  - name: default\n"
                           "    upstream: a\n"
                           "    fallbacks: [b]\n"
                           "    model: gpt-x\n"
                           "    retrieval: true\n"
                           "    retrieval_similarity: 0.7\n"
                           "    retrieval_importance: 1\n",
                           &err);
    if (cfg == NULL)
        fail_msg("%s", err);
    assert_string_equal(cfg->listen, "0.0.0.0:9000");
    assert_int_equal(cfg->workers, 3);
    assert_int_equal(cfg->max_body_size, 512 * 1024);
    assert_int_equal(cfg->client_timeout_ms, 1500);
    assert_int_equal(cfg->nclient_keys, 2);
    assert_string_equal(cfg->client_keys[0].tenant, "default");
    assert_string_equal(cfg->client_keys[1].tenant, "acme");
    assert_string_equal(cfg->upstreams[0].api_key, "sk-from-env");
    assert_string_equal(cfg->upstreams[1].api_key, "dflt");
    assert_int_equal(cfg->upstreams[0].first_byte_timeout_ms, 120000);
    assert_int_equal(cfg->default_profile, 1);
    const struct cfg_profile *p = cfg_profile_find(cfg, "default", 7);
    assert_int_equal(p->nchain, 2);
    assert_int_equal(p->chain[0], 0);
    assert_int_equal(p->chain[1], 1);
    assert_string_equal(p->model, "gpt-x");
    assert_true(p->retrieval);
    assert_true(p->retrieval_similarity == 0.7 && p->retrieval_importance == 1.0);
    assert_int_equal(p->retrieval_timeout_ms, 30); /* the defaults */
    assert_int_equal(p->retrieval_recent, 10);
    cfg_destroy(cfg);
}

static void test_errors_name_file_line_and_option(void **state)
{
    expect_error("server:\n  listen: x:1\n  wokers: 2\n", ":3: server.wokers: unknown option");
    expect_error("server:\n  client_timeout: 30\n", ":2: server.client_timeout: '30' needs a unit");
    expect_error("server:\n  workers: many\n", ":2: server.workers: 'many' must be a whole number");
    expect_error("server:\n  workers: 9999\n",
                 ":2: server.workers: '9999' is out of range: 0 to 256");
    expect_error("server:\n  client_timeout: 10ms\n",
                 "server.client_timeout: '10ms' is out of range: 1s to 1h");
    expect_error("server:\n  max_body_size: 1GiB\n", "out of range: 1KiB to 256MiB");
    expect_error("server:\n  max_body_size: 1PB\n", "server.max_body_size: '1PB' must be a size");
    expect_error("metrics:\n  enabled: maybe\n", "metrics.enabled: 'maybe' must be true or false");
    expect_error("log:\n  level: loud\n", "log.level: 'loud' must be debug");
    expect_error("upstreams: [{name: a, url: 'http://a/v1'}]\nprofiles:\n  - name: p\n"
                 "    upstream: a\n    retrieval_similarity: 1.5\n",
                 ":5: profiles[0].retrieval_similarity: '1.5' must be a number from 0 to 1");
    expect_error("upstreams: [{name: a, url: 'http://a/v1'}]\nprofiles:\n  - name: p\n"
                 "    upstream: a\n    retrieval_importance: high\n",
                 "retrieval_importance: 'high' must be a number from 0 to 1");
    expect_error("upstreams:\n  - name: a\n", ":2: upstreams: item is missing 'url'");
    expect_error("upstreams:\n  - {name: a, url: 'http://a', api_key: '${MP_NOPE_NOPE}'}\n",
                 "upstreams[0].api_key: environment variable MP_NOPE_NOPE is not set");
    expect_error("upstreams: 5\n", ":1: upstreams: expected a list");
    expect_error("server: [1, 2\n", "YAML error");
    expect_error("- a\n- b\n", "the top level must be a mapping");
}

static void test_validation(void **state)
{
    expect_error("upstreams:\n  - {name: a, url: 'ftp://a'}\n", "must start with http");
    char long_url[1200];
    snprintf(long_url, sizeof(long_url), "upstreams:\n  - {name: a, url: 'http://%01030d'}\n", 0);
    expect_error(long_url, "upstreams[a].url: longer than 1024 characters");
    expect_error("upstreams:\n  - {name: a, url: 'http://a'}\n  - {name: a, url: 'http://b'}\n",
                 "name 'a' is used twice");
    expect_error("upstreams:\n  - {name: a, url: 'http://a'}\nprofiles:\n  - {name: default, "
                 "upstream: zz}\n",
                 "no upstream named 'zz'");
    expect_error("server:\n  listen: nope\nupstreams:\n  - {name: a, url: 'http://a'}\n",
                 "server.listen: 'nope' must be host:port");
}

static void test_flags(void **state)
{
    struct cfg *cfg = cfg_defaults();
    char *err = NULL;
    assert_int_equal(cfg_set(cfg, "server.workers", "4", "--workers", &err), 0);
    assert_int_equal(cfg->workers, 4);
    assert_int_equal(cfg_set(cfg, "server.workers", "-1", "--workers", &err), -1);
    assert_non_null(strstr(err, "--workers: server.workers: '-1'"));
    free(err);
    cfg_destroy(cfg);
}

static void test_listen_parsing(void **state)
{
    char *host = NULL;
    int port = 0;
    assert_int_equal(cfg_parse_listen("[::1]:8080", &host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 8080);
    free(host);
    assert_int_equal(cfg_parse_listen(":80", &host, &port), -1);
    assert_int_equal(cfg_parse_listen("h:70000", &host, &port), -1);
}

/* The example file loads, validates, and mentions every option in the table. */
static void test_example_documents_every_option(void **state)
{
    char *err = NULL;
    /* it has no working fallbacks for its secrets: a deployment sets them */
    setenv("MEMPROXY_CLIENT_KEY", "ck-0123456789abcdef", 1);
    setenv("MEMPROXY_ADMIN_KEY", "ak-0123456789abcdef", 1);
    setenv("MEMPROXY_WEBHOOK_SECRET", "ws-0123456789abcdef", 1);
    struct cfg *cfg = cfg_load(example_path, &err);
    if (cfg == NULL)
        fail_msg("%s", err);
    assert_int_equal(cfgcheck_validate(cfg, &err), 0);
    cfg_destroy(cfg);

    char *table = NULL, *example = NULL;
    size_t tlen = 0, elen = 0;
    FILE *t = open_memstream(&table, &tlen);
    cfg_print_options(t);
    fclose(t);
    FILE *e = fopen(example_path, "r");
    assert_non_null(e);
    example = malloc(1 << 16);
    elen = fread(example, 1, (1 << 16) - 1, e);
    example[elen] = '\0';
    fclose(e);
    for (char *line = strtok(table, "\n"); line; line = strtok(NULL, "\n")) {
        char *name = strstr(line, "| `");
        if (name == NULL)
            continue;
        name += 3;
        *strchr(name, '`') = '\0';
        const char *leaf = strrchr(name, '.') ? strrchr(name, '.') + 1 : name;
        if (strchr(leaf, ']'))
            leaf = strchr(leaf, ']') + 1;
        char key[96];
        snprintf(key, sizeof(key), "%s:", leaf);
        if (strstr(example, key) == NULL)
            fail_msg("config/memproxy.example.yaml does not document %s", name);
    }
    free(table);
    free(example);
}

/* A ranks file of the 256 bytes alone (tests/bytes_tokenizer.h's, as a file). */
static char *bytes_ranks_file(void)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char text[256 * 12];
    size_t len = 0;
    for (int b = 0; b < 256; b++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%c%c== %d\n", a[b >> 2],
                                a[(b & 3) << 4], b);
    return write_tmp(text);
}

/* A profile counts with tokenizer.file unless it names its own file or pattern (or none); a
 * file and pattern that several name is loaded once. */
static void test_profile_tokenizers(void **state)
{
    char *ranks = bytes_ranks_file(), *err = NULL;
    char *text =
        xasprintf("upstreams: [{name: a, url: 'http://a/v1'}]\n"
                  "tokenizer: {file: %s, pattern: cl100k}\n"
                  "profiles:\n"
                  "  - {name: default, upstream: a}\n"
                  "  - {name: same, upstream: a, tokenizer_pattern: cl100k}\n"
                  "  - {name: other, upstream: a, tokenizer_pattern: o200k}\n"
                  "  - {name: own, upstream: a, tokenizer_file: %s, tokenizer_pattern: o200k}\n"
                  "  - {name: plain, upstream: a, tokenizer_file: none}\n",
                  ranks, ranks);
    struct cfg *cfg = load(text, &err);
    if (cfg == NULL)
        fail_msg("%s", err);
    const struct tiktoken *top = cfg_profile_find(cfg, "default", 7)->tokenizer;
    assert_non_null(top);
    assert_ptr_equal(cfg_profile_find(cfg, "same", 4)->tokenizer, top);
    const struct tiktoken *other = cfg_profile_find(cfg, "other", 5)->tokenizer;
    assert_non_null(other);
    assert_ptr_not_equal(other, top);
    assert_ptr_equal(cfg_profile_find(cfg, "own", 3)->tokenizer, other);
    assert_null(cfg_profile_find(cfg, "plain", 5)->tokenizer);
    assert_int_equal(cfg->ntokenizers, 2);
    assert_int_not_equal(tiktoken_id(top), tiktoken_id(other));
    cfg_destroy(cfg);
    free(text);

    text = xasprintf("upstreams: [{name: a, url: 'http://a/v1'}]\n"
                     "profiles: [{name: p, upstream: a, tokenizer_file: %s.missing}]\n",
                     ranks);
    char *want = xasprintf("profiles[p].tokenizer_file: %s.missing: No such file", ranks);
    expect_error(text, want);
    free(text);
    free(want);
    expect_error("upstreams: [{name: a, url: 'http://a/v1'}]\n"
                 "profiles: [{name: p, upstream: a, tokenizer_pattern: gpt2}]\n",
                 "profiles[p].tokenizer_pattern: 'gpt2' must be o200k or cl100k");
    expect_error("upstreams: [{name: a, url: 'http://a/v1'}]\ntokenizer: {pattern: p50k}\n",
                 "tokenizer.pattern: 'p50k' must be o200k or cl100k");
    unlink(ranks);
    free(ranks);
}

int main(int argc, char **argv)
{
    example_path = argc > 1 ? argv[1] : "config/memproxy.example.yaml";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_errors_name_file_line_and_option),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_listen_parsing),
        cmocka_unit_test(test_example_documents_every_option),
        cmocka_unit_test(test_profile_tokenizers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
