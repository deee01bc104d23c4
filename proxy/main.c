/*
 * memproxy: a custom-LLM proxy for voice agents. main: flags, configuration, start, exit.
 */
#include "base/jalloc.h"
#include "base/jtext.h"
#include "base/log.h"
#include "base/util.h"
#include "config/cfg.h"
#include "config/cfgcheck.h"
#include "memory/memory.h"
#include "proxy/http/server.h"
#include "proxy/jobs/lifecycle.h"
#include "proxy/upstream/upstream.h"
#include "transforms/tx.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void main_usage(FILE *out)
{
    fprintf(out, "usage: memproxy [options]\n"
                 "  -c, --config FILE     YAML configuration (see config/memproxy.example.yaml)\n"
                 "      --listen HOST:PORT  address to listen on (server.listen)\n"
                 "      --db PATH         SQLite database file (storage.path)\n"
                 "      --upstream URL    base URL of the default upstream, e.g. http://host/v1\n"
                 "      --workers N       network worker threads (server.workers; 0 = CPUs)\n"
                 "      --check-config    validate the configuration and exit\n"
                 "      --options         print every configuration option and exit\n"
                 "      --version         print the version and exit\n"
                 "  -h, --help            this text\n"
                 "environment (between the file and the flags): MEMPROXY_LISTEN,\n"
                 "  MEMPROXY_UPSTREAM_URL, MEMPROXY_UPSTREAM_API_KEY (or OPENAI_API_KEY),\n"
                 "  MEMPROXY_CLIENT_KEY\n");
}

struct main_args {
    const char *config, *listen, *upstream, *workers, *db;
    int check;
};

/* Returns -1 to go on, or an exit status. */
static int main_parse(int argc, char **argv, struct main_args *a)
{
    enum { O_LISTEN = 256, O_UPSTREAM, O_WORKERS, O_DB, O_CHECK, O_OPTIONS, O_VERSION };
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"listen", required_argument, NULL, O_LISTEN},
                                         {"upstream", required_argument, NULL, O_UPSTREAM},
                                         {"workers", required_argument, NULL, O_WORKERS},
                                         {"db", required_argument, NULL, O_DB},
                                         {"check-config", no_argument, NULL, O_CHECK},
                                         {"options", no_argument, NULL, O_OPTIONS},
                                         {"version", no_argument, NULL, O_VERSION},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            a->config = optarg;
            break;
        case O_LISTEN:
            a->listen = optarg;
            break;
        case O_UPSTREAM:
            a->upstream = optarg;
            break;
        case O_WORKERS:
            a->workers = optarg;
            break;
        case O_DB:
            a->db = optarg;
            break;
        case O_CHECK:
            a->check = 1;
            break;
        case O_OPTIONS:
            cfg_print_options(stdout);
            return 0;
        case O_VERSION:
            printf("memproxy %s\n", MEMPROXY_VERSION);
            return 0;
        case 'h':
            main_usage(stdout);
            return 0;
        default:
            main_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "memproxy: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

static struct cfg *main_config(const struct main_args *a)
{
    char *err = NULL;
    struct cfg *cfg = a->config ? cfg_load(a->config, &err) : cfg_defaults();
    if (cfg == NULL)
        goto fail;
    cfgcheck_apply_env(cfg);
    if (a->listen && cfg_set(cfg, "server.listen", a->listen, "--listen", &err) != 0)
        goto fail;
    if (a->workers && cfg_set(cfg, "server.workers", a->workers, "--workers", &err) != 0)
        goto fail;
    if (a->db && cfg_set(cfg, "storage.path", a->db, "--db", &err) != 0)
        goto fail;
    if (a->upstream)
        cfgcheck_set_upstream_url(cfg, a->upstream);
    if (cfgcheck_validate(cfg, &err) != 0 || tx_check_profiles(cfg, &err) != 0)
        goto fail;
    return cfg;
fail:
    fprintf(stderr, "memproxy: %s\n", err);
    free(err);
    cfg_destroy(cfg);
    return NULL;
}

/* Open the database, serve until a signal, close in the reverse order. */
static int main_serve(const struct cfg *cfg)
{
    char *err = NULL;
    struct server *srv = NULL;
    struct memory_opts mo = {.path = cfg->db_path,
                             .url = cfg->db_url,
                             .statement_timeout_ms = cfg->statement_timeout_ms,
                             .lease_ms = cfg->lease_ms,
                             .replica_wait_ms = cfg->replica_wait_ms,
                             .prepared_statements = cfg->prepared_statements,
                             .busy_timeout_ms = cfg->busy_timeout_ms,
                             .retention_days = cfg->retention_days,
                             .session_turns = (size_t)cfg->ws_session_turns,
                             .max_turns = (size_t)cfg->ws_max_turns,
                             .session_bytes = (size_t)cfg->ws_session_bytes,
                             .max_bytes = (size_t)cfg->ws_max_bytes,
                             .touch_ms = lifecycle_touch_ms(cfg),
                             .commit_delay_us = cfg->commit_delay_us,
                             .commit_spin_us = cfg->commit_spin_us,
                             .wal_flush_after = cfg->wal_flush_after};
    jtext_set_max_values((size_t)cfg->max_json_nodes); /* before any worker reads */
    struct memory *mem = memory_open(&mo, &err);
    int rc = 1;
    if (mem == NULL)
        goto out;
    srv = server_create(cfg, mem, &err);
    if (srv == NULL)
        goto out;
    if (cfg->db_url != NULL && *cfg->db_url != '\0')
        log_info("storage: postgresql (storage.url)"); /* the URL may hold a password */
    else
        log_info("storage: %s", cfg->db_path);
    rc = server_run(srv);
out:
    if (err != NULL)
        fprintf(stderr, "memproxy: %s\n", err);
    free(err);
    server_destroy(srv);
    memory_close(mem); /* after the workers: their last turns are committed here */
    return rc;
}

/*
 * glibc's defaults return freed memory to the kernel as soon as a thread's heap has 128 KiB
 * free at its top, and move that mark with every large block freed. A proxy frees and
 * allocates the same blocks for every request (libcurl's 16 KiB receive buffer is one, per
 * transfer), so its worker trimmed and regrew its heap — madvise and page faults — thousands
 * of times a second: 5–12% of its CPU under load (perf: heap_trim, sysmalloc and
 * malloc_consolidate). Memory freed stays in the process up to 8 MiB per heap; blocks of
 * 512 KiB and more (large request bodies) still come from and go back to the kernel each. The
 * operator's MALLOC_TRIM_THRESHOLD_ wins.
 */
static void main_tune_malloc(void)
{
    if (getenv("MALLOC_TRIM_THRESHOLD_") != NULL)
        return;
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    mallopt(M_MMAP_THRESHOLD, 512 << 10);
}

int main(int argc, char **argv)
{
    jalloc_install();    /* before the first jansson object (config/jalloc.h) */
    if (jalloc_active()) /* and libevent's first block; libcurl's: upstream_global_init() */
        event_set_mem_functions(jalloc_malloc, jalloc_realloc, jalloc_free);
    struct main_args a = {0};
    int rc = main_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    struct cfg *cfg = main_config(&a);
    if (cfg == NULL)
        return 2;
    if (a.check) {
        printf("%s: ok (%zu upstream(s), %zu profile(s))\n", cfg->source, cfg->nupstreams,
               cfg->nprofiles);
        cfg_destroy(cfg);
        return 0;
    }
    enum log_level lvl = LOG_INFO;
    log_level_parse(cfg->log_level, &lvl);
    log_set_level(lvl);
    if (cfg->nclient_keys == 0)
        log_warn("auth: no client keys configured; anyone who can reach %s can use the "
                 "upstream (set auth.client_keys or MEMPROXY_CLIENT_KEY)%s",
                 cfg->listen, cfg->auth_open ? " (auth.open)" : ", only this machine here");

    signal(SIGPIPE, SIG_IGN);
    main_tune_malloc();
    if (evthread_use_pthreads() != 0 || upstream_global_init() != 0) {
        fprintf(stderr, "memproxy: cannot initialise libevent threads or libcurl\n");
        cfg_destroy(cfg);
        return 1;
    }
    rc = main_serve(cfg);
    upstream_global_cleanup();
    cfg_destroy(cfg);
    return rc;
}
