#include "proxy/http/ui.h"

#include "proxy/http/respond.h"
#include "proxy/http/worker.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

/* Scripts and styles from here only, no inline script or eval, fetches to here only, no
 * framing: a caller's words shown on the page can run nothing even if a bug put them there
 * as markup. */
#define UI_CSP                                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

int ui_match(const char *path, size_t len)
{
    return len >= 3 && memcmp(path, "/ui", 3) == 0 && (len == 3 || path[3] == '/');
}

static const struct ui_asset *ui_find(const char *path, size_t len)
{
    for (size_t i = 0; i < ui_nassets; i++) {
        if (strlen(ui_assets[i].path) == len && memcmp(ui_assets[i].path, path, len) == 0)
            return &ui_assets[i];
    }
    return NULL;
}

void ui_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    const struct ui_asset *a = w->cfg->ui_enabled ? ui_find(path, len) : NULL;
    if (w->cfg->ui_enabled && len == 3) { /* "/ui": the page's links are relative to /ui/ */
        evhttp_add_header(h, "Location", "/ui/");
        respond_send(w, METRICS_ROUTE_OTHER, req, 308, "text/plain", "", 0);
        return;
    }
    if (a == NULL) {
        struct apierr e;
        apierr_set(&e, APIERR_NOT_FOUND, NULL,
                   w->cfg->ui_enabled ? "no such file of the viewer" : "the viewer is off");
        respond_error(w, METRICS_ROUTE_OTHER, req, &e);
        return;
    }
    evhttp_add_header(h, "Content-Security-Policy", UI_CSP);
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    respond_send(w, METRICS_ROUTE_OTHER, req, 200, a->type, (const char *)a->data, a->len);
}
