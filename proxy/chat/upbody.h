/*
 * upbody: a chat request's upstream body — the client's request rebuilt by the profile's
 * transforms with the session's memory (docs/design.md §7) — in two steps around the reads it
 * may wait for (proxy/chat/chat.c runs them off the loop with worker_read):
 *
 *   upbody_begin  the session's runtime params, injected memory and (stored mode) history,
 *                 from the working set; the messages before the transforms; retrieval's
 *                 pick for them when the request retrieves (its candidates are read next,
 *                 into upbody_pick())
 *   upbody_end    the retrieved turns' message, the transforms, the cache key, the
 *                 X-Memproxy-Context header, the body's text
 *
 * Ownership: upbody_begin returns a builder freed with upbody_free; it borrows in's pointers
 * until then (the request's messages are changed in place: in stored mode the ones that
 * repeat the history are taken out). upbody_end returns the body (free()).
 */
#ifndef MEMPROXY_UPBODY_H
#define MEMPROXY_UPBODY_H

#include <event2/http.h>
#include <stddef.h>

struct cfg_profile;
struct chatreq;
struct jmemo;
struct memory_rec;
struct recall_pick;
struct upbody;

struct upbody_in {
    const struct cfg_profile *prof;
    struct chatreq *creq;
    struct memory_rec *rec; /* the session's record, or NULL: nothing remembered */
    struct jmemo *memo;     /* the worker's, or NULL */
    const char *tenant, *user;
    int stored;         /* stored history mode: the session's turns are sent */
    int no_memory;      /* the key may not have remembered memory injected */
    int recall;         /* the request retrieves: a pick is made */
    const float *query; /* retrieval: the question's embedding, or NULL */
    size_t qdim;
};

struct upbody *upbody_begin(const struct upbody_in *in);
/* Retrieval's pick, for its candidates' read (memory_recall), or NULL. */
struct recall_pick *upbody_pick(struct upbody *b);
/* The body's text (*len bytes); key gets the answer cache's key when the profile caches
 * and the body may be answered from it, else "". X-Memproxy-Context goes on req's output
 * headers when the profile asks for it. */
char *upbody_end(struct upbody *b, struct evhttp_request *req, char key[65], size_t *len);
void upbody_free(struct upbody *b);

#endif
