/*
 * workset: the working set — each hot session's recent turns in memory, so that a request of
 * a call in progress reads nothing from the database. Shared by all workers: the table under
 * one lock, each entry under its own (mu), held by memory.c while a window is reconciled and
 * its writes are numbered and submitted, so turns are numbered (seq) in the order they are
 * committed even when two requests of one session race.
 *
 * An entry holds at most session_turns recent turns within session_bytes (the newest turn
 * always stays), all entries together max_turns and max_bytes (base/jsize.h's estimate of
 * the trees: 60 turns of 3 MiB once raised memory by 200 MB under a cap that counted only
 * turns); the least recently used entries that nobody uses and that have nothing in flight
 * go first. An
 * entry is marked stale when a commit for it failed, when a change was made to its session
 * behind it (a REST change, a user's data), or when it sat idle past the retention period;
 * the next acquire then says it must be read again.
 *
 * struct workset_entry is open to memory.c, which keeps the session's state in it; the
 * fields under "the working set's lock" are this module's. Ownership: entries belong to the
 * working set; a caller holds one between workset_acquire and workset_release.
 */
#ifndef MEMPROXY_WORKSET_H
#define MEMPROXY_WORKSET_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct turnlist;
struct workset;

struct workset_entry {
    char *key; /* tenant, 0x1f, session id */
    uint64_t hash;
    struct workset_entry *hnext;       /* bucket chain */
    struct workset_entry *prev, *next; /* LRU list, most recent first */
    pthread_mutex_t mu;
    /* under mu */
    int loaded;
    uint64_t gen;           /* counts changes to turns: a read begun before one is not applied */
    int complete;           /* turns hold the session from its first turn */
    int warned_back;        /* memory_turn_ids_back() has logged for this session */
    struct turnlist *turns; /* the recent tail; elements never change once added */
    int64_t last_seq;
    /* The last window's fingerprint (reconcile's window_hash). Written (to session_windows,
     * not the session's row) in alignment mode only, where it is what keeps a replay across
     * a restart from being matched as new turns; a turn-id window is matched by its ids, so
     * there it saves only the work of a replay, and writing it on every request cost the
     * writer ~8 us a request in a call. */
    uint64_t window_hash;
    uint64_t system_hash; /* of the system messages written last (memory_system_hash) */
    int exists;           /* the session row is in the database, or on its way */
    char *user, *profile; /* as last written */
    json_t *inject;       /* system messages for inject_memory, read with the entry */
    json_t *params;       /* the session's runtime params (an object), or NULL */
    json_t *user_info;    /* its labels and metadata for user_context (entry.c), or NULL */
    json_t *system;       /* the client's last system messages [{role, content}], or NULL */
    /* the call's own summary (callsum.h), up to turn call_through, or NULL; the turns the
     * client's next window is expected to span as last written, and the last window's span
     * (tracked for summary_threshold only; 0 when not known) */
    char *call_summary;
    int64_t call_through, window_turns, window_span;
    /* under the working set's lock (workset.c) */
    int refs;             /* recs using it */
    int pending;          /* submitted batches not yet committed */
    int stale;            /* a commit failed: reload once nothing is pending */
    int64_t version;      /* a shared store's version of the session that the entry holds */
    size_t counted;       /* its share of the working set's turns */
    size_t counted_bytes; /* and of its bytes */
    int64_t used_ms;
};

struct workset_opts {
    size_t session_turns, max_turns; /* memory.session_turns, memory.max_turns */
    size_t session_bytes, max_bytes; /* memory.session_bytes, memory.max_bytes */
    int64_t retention_ms;            /* an entry idle longer is read again */
};

struct workset *workset_create(const struct workset_opts *o);
/* Frees every entry; nobody may hold one. */
void workset_destroy(struct workset *m);

/* The session's entry (key: tenant, 0x1f, id), created empty if new; held until
 * workset_release(). *reload is set when its turns must be read again (it went stale and
 * nothing is in flight for it). */
struct workset_entry *workset_acquire(struct workset *m, const char *key, int *reload);
void workset_release(struct workset *m, struct workset_entry *e);
/* e->mu held: bound the entry's turns to session_turns and count them in the total
 * (at least 1 an entry, so sessions without turns count too), evicting what no longer fits. */
void workset_account(struct workset *m, struct workset_entry *e);

/* A batch for e was submitted; and, on the writer thread once it is over: e's batch settled
 * (a failure makes e stale), the session under key (if any) and every session of tenant (if
 * any) must be read again. e may be NULL. */
void workset_pending(struct workset *m, struct workset_entry *e);
/* version: with a shared store (store_shared()), the session's version after e's batch (0:
 * not known). One more than the entry's: the entry holds it; any other: another replica
 * wrote the session in between, so e must be read again. */
void workset_settled(struct workset *m, struct workset_entry *e, int ok, const char *key,
                     const char *tenant, int64_t version);
/* A shared store's version of what e holds: set when e is read (which, with nothing in flight
 * for e, makes it no longer stale); and, to be checked against
 * the database's before e is used, e's version when nothing is in flight for it and it is
 * not to be read again anyway, else -1 (nothing to check). */
void workset_set_version(struct workset *m, struct workset_entry *e, int64_t version);
int64_t workset_check_version(struct workset *m, struct workset_entry *e);
/* Whether batches for e are in flight (workset_pending, not yet settled). */
int workset_in_flight(struct workset *m, struct workset_entry *e);
/* e is read again before its next use (once nothing is in flight for it). */
void workset_mark_stale(struct workset *m, struct workset_entry *e);

/* Sessions, turns and their bytes held now. */
void workset_counts(struct workset *m, uint64_t *sessions, uint64_t *turns, uint64_t *bytes);

#endif
