#include "memory/readpool.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/memory.h"

#include <pthread.h>
#include <stdlib.h>

struct readpool_job {
    readpool_fn fn;
    readpool_done done;
    void *arg;
    struct event_base *base;
    int failed;
    struct readpool_job *next;
};

/* A queue of jobs, first in first out. */
struct readpool_queue {
    struct readpool_job *head, *tail;
};

struct readpool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct readpool_queue lanes[READPOOL_LANES]; /* taken in this order */
    int stop;
    size_t n;
    pthread_t *threads;
    struct memory_reader **readers;
};

struct readpool_thread {
    struct readpool *p;
    struct memory_reader *r;
};

/* On the asking base's thread. */
static void readpool_back(evutil_socket_t fd, short what, void *arg)
{
    struct readpool_job *j = arg;
    (void)fd;
    (void)what;
    j->done(j->arg, j->failed);
    free(j);
}

static struct readpool_job *readpool_pop(struct readpool_queue *q)
{
    struct readpool_job *j = q->head;
    if (j != NULL) {
        q->head = j->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    return j;
}

/* The next job, the first lane's first; NULL once stopped with nothing queued. */
static struct readpool_job *readpool_take(struct readpool *p)
{
    struct readpool_job *j = NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        for (int l = 0; l < READPOOL_LANES && j == NULL; l++)
            j = readpool_pop(&p->lanes[l]);
        if (j != NULL || p->stop)
            break;
        pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return j;
}

static void *readpool_main(void *arg)
{
    struct readpool_thread *t = arg;
    struct readpool *p = t->p;
    struct memory_reader *r = t->r;
    struct readpool_job *j;
    struct timeval now = {0, 0};
    free(t);
    log_set_thread_name("pool");
    while ((j = readpool_take(p)) != NULL) {
        memory_reader_clear(r);
        j->fn(r, j->arg);
        j->failed = memory_reader_failed(r);
        if (event_base_once(j->base, -1, EV_TIMEOUT, readpool_back, j, &now) != 0)
            log_fatal("readpool: cannot hand a read back to its loop");
    }
    return NULL;
}

struct readpool *readpool_create(struct memory *m, size_t threads, char **err)
{
    struct readpool *p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = xcalloc(threads, sizeof(*p->threads));
    p->readers = xcalloc(threads, sizeof(*p->readers));
    for (size_t i = 0; i < threads; i++) {
        p->readers[i] = memory_reader_open(m, err);
        if (p->readers[i] == NULL)
            goto fail;
        struct readpool_thread *t = xmalloc(sizeof(*t));
        *t = (struct readpool_thread){.p = p, .r = p->readers[i]};
        if (util_thread_start(&p->threads[i], readpool_main, t) != 0)
            log_fatal("readpool: cannot start a thread");
        p->n++;
    }
    return p;
fail:
    readpool_destroy(p);
    return NULL;
}

void readpool_destroy(struct readpool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->n; i++) {
        pthread_join(p->threads[i], NULL);
        memory_reader_close(p->readers[i]);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->readers);
    free(p);
}

void readpool_run(struct readpool *p, enum readpool_lane lane, struct event_base *base,
                  readpool_fn fn, readpool_done done, void *arg)
{
    struct readpool_job *j = xcalloc(1, sizeof(*j));
    *j = (struct readpool_job){.fn = fn, .done = done, .arg = arg, .base = base};
    struct readpool_queue *q = &p->lanes[lane];
    pthread_mutex_lock(&p->mu);
    if (q->tail != NULL)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
