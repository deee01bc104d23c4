/*
 * ui: the call viewer's files, served at GET /ui/ from the binary itself (ui/embed.py compiles
 * ui/index.html, app.css and app.js in at build time: no files beside the binary, no CDN).
 * The page reads the REST API with an admin key the person enters (docs/ui.md); this module
 * only serves its files, with a Content-Security-Policy that allows scripts and styles from
 * the same origin only, no inline script, no eval, and connections to the same origin only.
 * ui.enabled: false answers 404.
 */
#ifndef MEMPROXY_UI_H
#define MEMPROXY_UI_H

#include <event2/http.h>
#include <stddef.h>

struct worker;

struct ui_asset {
    const char *path; /* "/ui/", "/ui/app.js", ... */
    const char *type;
    const unsigned char *data;
    size_t len;
};
extern const struct ui_asset ui_assets[];
extern const size_t ui_nassets;

/* Is path (query stripped) one of the viewer's, "/ui" included (redirected to "/ui/")? */
int ui_match(const char *path, size_t len);
/* Answer a GET or HEAD for path. */
void ui_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len);

#endif
