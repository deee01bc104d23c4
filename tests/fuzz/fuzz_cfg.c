/*
 * Fuzz the configuration loader with YAML text: it must load or refuse with a message that
 * names the source, never crash. A loaded config goes through validation too.
 */
#include "config/cfg.h"
#include "config/cfgcheck.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL;
    struct cfg *cfg = cfg_load_text((const char *)data, size, "fuzz.yaml", &err);
    if (cfg == NULL) {
        if (err == NULL || strncmp(err, "fuzz.yaml:", 10) != 0)
            abort();
        free(err);
        return 0;
    }
    if (cfgcheck_validate(cfg, &err) != 0)
        free(err);
    cfg_destroy(cfg);
    return 0;
}
