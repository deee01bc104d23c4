#include "proxy/jobs/lifecycle.h"

#include "base/log.h"
#include "base/util.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/hook.h"
#include "proxy/jobs/summarizer.h"
#include "proxy/jobs/task.h"

#include <string.h>

#define LIFECYCLE_SWEEP_MAX 200 /* sessions stopped per sweep: the writer never stalls long */
#define LIFECYCLE_TOUCH_MAX 60000

struct lifecycle {
    struct worker *w;
    struct task *task; /* runs lifecycle_sweep every every_ms */
    int64_t every_ms;
};

/* A stop waiting for its commit. */
struct lifecycle_pending {
    struct worker *w;
    memory_done_cb cb;
    void *arg;
};

static void lifecycle_committed(void *arg, int ok)
{
    struct lifecycle_pending *p = arg;
    struct worker *w = p->w;
    if (ok) {
        hook_wake(w->hooks);
        summarizer_wake(w->summarizer);
    }
    if (p->cb != NULL)
        p->cb(p->arg, ok);
    free(p);
    worker_release(w);
}

void lifecycle_stop(struct worker *w, const char *tenant, const char *id, const char *profile,
                    int64_t idle_before, memory_done_cb cb, void *arg)
{
    struct lifecycle_pending *p = xcalloc(1, sizeof(*p));
    *p = (struct lifecycle_pending){.w = w, .cb = cb, .arg = arg};
    json_t *how = json_pack("{s:o}", "hooks", hook_targets(w->cfg, tenant));
    const struct cfg_profile *prof = cfg_profile_find(w->cfg, profile, strlen(profile));
    if (prof != NULL && prof->summarize) { /* its dumps wait a while for the summary */
        json_object_set_new(how, "summarize", json_true());
        json_object_set_new(how, "hold_ms", json_integer(prof->summary_wait_ms));
    }
    if (idle_before > 0)
        json_object_set_new(how, "idle_before", json_integer(idle_before));
    worker_hold(w); /* a draining worker waits for the commit */
    memory_change(w->mem, tenant, id, MEMORY_STOP, how, w->base, lifecycle_committed, p);
    json_decref(how);
}

int64_t lifecycle_touch_ms(const struct cfg *cfg)
{
    int64_t t = cfg->idle_timeout_ms / 4;
    return t > 0 && t < LIFECYCLE_TOUCH_MAX ? t : LIFECYCLE_TOUCH_MAX;
}

static void lifecycle_sweep(void *arg)
{
    struct lifecycle *lc = arg;
    struct worker *w = lc->w;
    task_after(lc->task, lc->every_ms);
    if (w->draining)
        return;
    int64_t before = util_wall_ms() - w->cfg->idle_timeout_ms - lc->every_ms;
    json_t *idle = memory_idle_sessions(w->reader, before, LIFECYCLE_SWEEP_MAX), *s;
    size_t i;
    json_array_foreach(idle, i, s) {
        const char *tenant = json_string_value(json_object_get(s, "tenant"));
        const char *id = json_string_value(json_object_get(s, "id"));
        const char *profile = json_string_value(json_object_get(s, "profile"));
        if (tenant == NULL || id == NULL || profile == NULL) {
            log_warn("idle sweep: a stored session's ids are not text; it is skipped");
            continue;
        }
        log_info("session %s: idle for %lds, stopping", id, w->cfg->idle_timeout_ms / 1000);
        lifecycle_stop(w, tenant, id, profile, before, NULL, NULL);
    }
    json_decref(idle);
}

struct lifecycle *lifecycle_create(struct worker *w)
{
    if (w->cfg->idle_timeout_ms <= 0)
        return NULL;
    struct lifecycle *lc = xcalloc(1, sizeof(*lc));
    lc->w = w;
    lc->every_ms = lifecycle_touch_ms(w->cfg);
    lc->task = task_create(w->base, lifecycle_sweep, lc);
    return lc;
}

void lifecycle_destroy(struct lifecycle *lc)
{
    if (lc == NULL)
        return;
    task_destroy(lc->task);
    free(lc);
}
