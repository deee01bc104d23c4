/* Unit tests: the read pool (memory/readpool.c): a job's read runs on a pool thread with that
 * thread's reader, its done on the asking loop; the call lane goes ahead of the REST lane;
 * destroying the pool runs what is queued. On SQLite: the pool does not care which store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/memory.h"
#include "memory/readpool.h"

#include <event2/thread.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <unistd.h>

#define MAX_DONE 8

struct env {
    char *path;
    struct memory *m;
    struct event_base *base;
    sem_t gate;               /* the first job waits on it: the others queue meanwhile */
    sem_t started;            /* ... which it posts once it runs */
    char order[MAX_DONE + 1]; /* the jobs' names, in the order their done ran */
    size_t ndone;
};

struct job {
    struct env *v;
    char name;
    int gated;
    pthread_t ran_on;  /* the thread its read ran on */
    pthread_t done_on; /* ... and its done */
    struct memory_reader *reader;
};

static void env_open(struct env *v)
{
    char *dir = xstrdup("/tmp/memproxy-readpool-XXXXXX"), *err = NULL;
    memset(v, 0, sizeof(*v));
    assert_non_null(mkdtemp(dir));
    v->path = xasprintf("%s/m.db", dir);
    free(dir);
    struct memory_opts o = {.path = v->path, .busy_timeout_ms = 5000};
    v->m = memory_open(&o, &err);
    assert_non_null(v->m);
    v->base = event_base_new();
    sem_init(&v->gate, 0, 0);
    sem_init(&v->started, 0, 0);
}

static void env_close(struct env *v)
{
    memory_close(v->m);
    event_base_free(v->base);
    sem_destroy(&v->gate);
    sem_destroy(&v->started);
    unlink(v->path);
    free(v->path);
}

static void job_read(struct memory_reader *r, void *arg)
{
    struct job *j = arg;
    j->ran_on = pthread_self();
    j->reader = r;
    if (j->gated) {
        sem_post(&j->v->started);
        sem_wait(&j->v->gate);
    }
}

static void job_done(void *arg, int failed)
{
    struct job *j = arg;
    struct env *v = j->v;
    assert_int_equal(failed, 0);
    j->done_on = pthread_self();
    v->order[v->ndone++] = j->name;
    v->order[v->ndone] = '\0';
}

/* Run the loop until n dones ran. */
static void run_until(struct env *v, size_t n)
{
    for (int i = 0; i < 5000 && v->ndone < n; i++) {
        event_base_loop(v->base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
    assert_int_equal(v->ndone, n);
}

/* The environment and a pool of threads readers over it. */
static struct readpool *pool_open(struct env *v, size_t threads)
{
    char *err = NULL;
    env_open(v);
    struct readpool *p = readpool_create(v->m, threads, &err);
    assert_non_null(p);
    return p;
}

static void test_read_off_the_loop_done_on_it(void **state)
{
    (void)state;
    struct env v;
    struct readpool *p = pool_open(&v, 1);
    struct job a = {.v = &v, .name = 'a'};
    readpool_run(p, READPOOL_REST, v.base, job_read, job_done, &a);
    run_until(&v, 1);
    assert_false(pthread_equal(a.ran_on, pthread_self())); /* read on the pool's thread */
    assert_true(pthread_equal(a.done_on, pthread_self())); /* done on the loop's */
    assert_non_null(a.reader);
    readpool_destroy(p);
    env_close(&v);
}

static void test_calls_go_ahead_of_rest_reads(void **state)
{
    (void)state;
    struct env v;
    struct readpool *p = pool_open(&v, 1);
    /* a holds the only thread; b and c (REST) queue, then d and e (calls) */
    struct job a = {.v = &v, .name = 'a', .gated = 1}, b = {.v = &v, .name = 'b'},
               c = {.v = &v, .name = 'c'}, d = {.v = &v, .name = 'd'}, e = {.v = &v, .name = 'e'};
    readpool_run(p, READPOOL_REST, v.base, job_read, job_done, &a);
    sem_wait(&v.started);
    readpool_run(p, READPOOL_REST, v.base, job_read, job_done, &b);
    readpool_run(p, READPOOL_REST, v.base, job_read, job_done, &c);
    readpool_run(p, READPOOL_CALL, v.base, job_read, job_done, &d);
    readpool_run(p, READPOOL_CALL, v.base, job_read, job_done, &e);
    sem_post(&v.gate);
    run_until(&v, 5);
    assert_string_equal(v.order, "adebc"); /* a was running; then calls first, each in order */
    readpool_destroy(p);
    env_close(&v);
}

static void test_destroy_runs_what_is_queued(void **state)
{
    (void)state;
    struct env v;
    struct readpool *p = pool_open(&v, 2);
    struct job jobs[6];
    for (int i = 0; i < 6; i++) {
        jobs[i] = (struct job){.v = &v, .name = (char)('a' + i)};
        readpool_run(p, i % 2 ? READPOOL_CALL : READPOOL_REST, v.base, job_read, job_done,
                     &jobs[i]);
    }
    readpool_destroy(p); /* the reads run; their dones wait on the loop */
    for (int i = 0; i < 6; i++)
        assert_non_null(jobs[i].reader);
    event_base_loop(v.base, EVLOOP_NONBLOCK);
    assert_int_equal(v.ndone, 6);
    env_close(&v);
}

int main(void)
{
    evthread_use_pthreads();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_off_the_loop_done_on_it),
        cmocka_unit_test(test_calls_go_ahead_of_rest_reads),
        cmocka_unit_test(test_destroy_runs_what_is_queued),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
