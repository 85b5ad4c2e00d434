/* Textbook group commit in C, the baseline for bench_durability's group-commit step.

   Each thread, per call: spin WORK_US microseconds (the caller's own work), append a
   1216-byte record to the log file under a mutex, then wait until an fdatasync covers it:
   the first waiter to find none in flight runs it for everyone (leader/follower, a mutex and
   a condition variable), then copies the record to a second "segment" file. No GIL.

   usage: group_commit DIR WORK_US ZERO_FILLED(0|1) SECONDS
   prints: threads calls_per_s, for 1, 4 and 8 threads */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd, sfd, zero_filled, work_us;
static long written, synced, seg;
static int syncing;
static pthread_mutex_t wl = PTHREAD_MUTEX_INITIALIZER, m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int stop;
static long counts[16];
static char buf[1216];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *arg) {
    long i = (long)arg, c = 0;
    while (!stop) {
        double end = now() + work_us * 1e-6;
        while (now() < end) {}
        pthread_mutex_lock(&wl);
        if (pwrite(fd, buf, sizeof buf, written) != sizeof buf) abort();
        written += sizeof buf;
        long pos = written;
        pthread_mutex_unlock(&wl);
        pthread_mutex_lock(&m);
        while (synced < pos) {
            if (!syncing) {
                syncing = 1;
                long target = written;
                pthread_mutex_unlock(&m);
                if (fdatasync(fd)) abort();
                pthread_mutex_lock(&m);
                synced = target;
                syncing = 0;
                pthread_cond_broadcast(&cv);
            } else {
                pthread_cond_wait(&cv, &m);
            }
        }
        pthread_mutex_unlock(&m);
        pthread_mutex_lock(&wl);
        if (pwrite(sfd, buf, sizeof buf, seg) != sizeof buf) abort();
        seg += sizeof buf;
        pthread_mutex_unlock(&wl);
        c++;
    }
    counts[i] = c;
    return 0;
}

static double run(const char *dir, int n, double seconds) {
    char path[4096];
    snprintf(path, sizeof path, "%s/gc.wal", dir);
    unlink(path);
    fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (zero_filled) {
        static char z[1 << 20];
        for (int k = 0; k < 64; k++)
            if (write(fd, z, sizeof z) != sizeof z) abort();
        fdatasync(fd);
    }
    snprintf(path, sizeof path, "%s/gc.log", dir);
    sfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    written = synced = seg = 0;
    stop = 0;
    pthread_t t[16];
    for (long i = 0; i < n; i++) pthread_create(&t[i], 0, worker, (void *)i);
    usleep((useconds_t)(seconds * 1e6));
    stop = 1;
    long sum = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], 0);
        sum += counts[i];
    }
    close(fd);
    close(sfd);
    return sum / seconds;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR WORK_US ZERO_FILLED SECONDS\n", argv[0]);
        return 2;
    }
    memset(buf, 'x', sizeof buf);
    work_us = atoi(argv[2]);
    zero_filled = atoi(argv[3]);
    double seconds = atof(argv[4]);
    int threads[] = {1, 4, 8};
    for (int k = 0; k < 3; k++) printf("%d %.0f\n", threads[k], run(argv[1], threads[k], seconds));
    return 0;
}
