/*
 * apierr: the one place where an error that reaches a client gets its HTTP status, its type
 * and its code.
 *
 * Modules below the HTTP layer (request parsing, relaying) describe what went wrong with a
 * kind and a message; apierr_status() and apierr_json() turn that into the response. The body
 * is OpenAI's error shape, which every OpenAI SDK parses:
 *   {"error":{"message":"...","type":"invalid_request_error","param":"messages","code":"..."}}
 */
#ifndef MEMPROXY_APIERR_H
#define MEMPROXY_APIERR_H

#include <jansson.h>
#include <stddef.h>

enum apierr_kind {
    APIERR_INVALID_REQUEST,       /* 400 */
    APIERR_INVALID_JSON,          /* 400 */
    APIERR_UNAUTHORIZED,          /* 401 */
    APIERR_BAD_SIGNATURE,         /* 401: a notification's signature does not verify */
    APIERR_FORBIDDEN,             /* 403 */
    APIERR_NOT_FOUND,             /* 404 */
    APIERR_METHOD,                /* 405 */
    APIERR_UNKNOWN_METHOD,        /* 501: a method memproxy does not serve anywhere */
    APIERR_CONFLICT,              /* 409 */
    APIERR_MISDIRECTED,           /* 421: a Host not in server.allowed_hosts */
    APIERR_TIMEOUT,               /* 408: the request was not received in time */
    APIERR_TOO_LARGE,             /* 413 */
    APIERR_MEDIA_TYPE,            /* 415: a body that is not application/json */
    APIERR_INTERNAL,              /* 500 */
    APIERR_STORAGE,               /* 503: a commit failed (a full disk); retry */
    APIERR_UPSTREAM_UNREACHABLE,  /* 502 */
    APIERR_UPSTREAM_BAD_RESPONSE, /* 502 */
    APIERR_UNAVAILABLE,           /* 503: shutting down */
    APIERR_BUSY,                  /* 503: server.max_connections reached */
    APIERR_UPSTREAM_TIMEOUT,      /* 504 */
    APIERR__COUNT
};

struct apierr {
    enum apierr_kind kind;
    char message[512];
    char param[128]; /* "" = none */
};

void apierr_set(struct apierr *e, enum apierr_kind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A body jtext could not read (jerr as jtext_load() left it): 413 request_too_large past
 * server.max_json_nodes, else 400 invalid_json saying where and why ("line 1, column 53:
 * \u0000 is not allowed"), so that a client can find the byte its encoder wrote. The reason
 * is one of jtext's fixed phrases, never the client's own bytes. */
void apierr_json_syntax(struct apierr *e, const json_error_t *jerr);

int apierr_status(enum apierr_kind kind);
const char *apierr_type(enum apierr_kind kind);
const char *apierr_code(enum apierr_kind kind);

/* The JSON error body, NUL-terminated; caller frees. */
char *apierr_json(const struct apierr *e, size_t *len);

#endif
