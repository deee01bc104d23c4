/*
 * task: background work on a worker's event loop — the webhook deliverer, the summarizer.
 * A task runs its function once the loop starts, again when it asks (task_after) and
 * whenever any thread wakes it (task_wake, e.g. after a commit that made new work).
 *
 * Ownership: task_create() on the loop's thread before the loop runs; task_destroy() after it
 * has ended.
 */
#ifndef MEMPROXY_TASK_H
#define MEMPROXY_TASK_H

#include <event2/event.h>
#include <stdint.h>

struct task;
typedef void (*task_fn)(void *arg);

struct task *task_create(struct event_base *base, task_fn fn, void *arg);
/* Run again in ms (0: on the next loop turn); replaces a run already planned. */
void task_after(struct task *t, int64_t ms);
/* Run again within ms at the latest: a run planned sooner stands. */
void task_within(struct task *t, int64_t ms);
/* Run soon. Thread-safe (libevent's threading is on); t may be NULL. */
void task_wake(struct task *t);
void task_destroy(struct task *t);

#endif
