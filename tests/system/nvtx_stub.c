/* A stand-in NVTX library for the system tests: records every range
 * pushed and popped, with the calling thread, one line each, in the file
 * $NVTX_STUB_LOG (himeno loads it through HIMENO_NVTX_LIB). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *what, const char *name) {
    const char *path = getenv("NVTX_STUB_LOG");
    if (!path) return;
    pthread_mutex_lock(&lock);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%ld %s %s\n", (long)syscall(SYS_gettid), what, name ? name : "-");
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

int nvtxRangePushA(const char *message) {
    say("push", message);
    return 0;
}

int nvtxRangePop(void) {
    say("pop", NULL);
    return 0;
}
