#include "proxy/jobs/task.h"

#include "base/log.h"

#include "base/util.h"

struct task {
    struct event *timer; /* the planned run */
    struct event *wake;  /* activated from any thread */
    uint64_t due_us;     /* when the planned run is due (util_now_us()); 0: none planned */
    task_fn fn;
    void *arg;
};

static void task_run(evutil_socket_t fd, short what, void *arg)
{
    struct task *t = arg;
    (void)fd;
    (void)what;
    t->fn(t->arg);
}

/* The planned run. */
static void task_due(evutil_socket_t fd, short what, void *arg)
{
    struct task *t = arg;
    t->due_us = 0;
    task_run(fd, what, arg);
}

struct task *task_create(struct event_base *base, task_fn fn, void *arg)
{
    struct task *t = xcalloc(1, sizeof(*t));
    t->fn = fn;
    t->arg = arg;
    t->timer = evtimer_new(base, task_due, t);
    t->wake = event_new(base, -1, 0, task_run, t);
    if (t->timer == NULL || t->wake == NULL)
        log_fatal("task: cannot create its events");
    task_after(t, 0);
    return t;
}

void task_after(struct task *t, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    t->due_us = util_now_us() + (uint64_t)ms * 1000;
    evtimer_add(t->timer, &tv);
}

void task_within(struct task *t, int64_t ms)
{
    if (t->due_us != 0 && t->due_us <= util_now_us() + (uint64_t)(ms > 0 ? ms : 0) * 1000)
        return;
    task_after(t, ms);
}

void task_wake(struct task *t)
{
    if (t != NULL)
        event_active(t->wake, EV_TIMEOUT, 0);
}

void task_destroy(struct task *t)
{
    if (t == NULL)
        return;
    event_free(t->timer);
    event_free(t->wake);
    free(t);
}
