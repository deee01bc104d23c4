/*
 * replay: run a fuzz target over its seed corpus (files or directories given as arguments),
 * so every build checks the corpora without libFuzzer. Exits non-zero if a directory holds no
 * input, so an emptied corpus cannot pass silently.
 */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int count = 0;
    if (d == NULL) {
        perror(dir);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path) == 0)
            count++;
    }
    closedir(d);
    printf("%s: %d input(s) replayed\n", dir, count);
    return count > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0 ||
            (S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i])) != 0)
            rc = 1;
    }
    return rc;
}
