/* How fast can a capture file's bytes reach a parser: read() into a reused buffer (what
 * lnetcap does) against a memory map of a window at a time (what goal 3 of the speed issue
 * asks to weigh), on a file already in the page cache. The parser is stood in for by a
 * load every STRIDE bytes: 64 touches every cache line (a header-only capture, whose
 * records are nearly all header), 1500 about one line a record (full payload, where only
 * the headers are read).
 *
 *   cc -O2 -o /tmp/read-vs-map benches/read-vs-map.c && /tmp/read-vs-map FILE [STRIDE]
 *
 * Prints the median of 7 rounds of each way (the first round of all warms the cache). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static volatile unsigned long sink;

/* mode 0: read() of `w` bytes at a time; 1: mmap windows of `w`; 2: the same with
 * MADV_SEQUENTIAL; 3: with MADV_POPULATE_READ (page tables filled in one call). */
static double one(const char *path, int mode, size_t w, size_t stride, char *buf) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        exit(1);
    }
    size_t n = (size_t)st.st_size;
    unsigned long s = 0;
    double t0 = now();
    if (mode == 0) {
        ssize_t r;
        while ((r = read(fd, buf, w)) > 0)
            for (ssize_t i = 0; i < r; i += (ssize_t)stride) s += (unsigned char)buf[i];
    } else {
        for (size_t off = 0; off < n; off += w) {
            size_t len = n - off < w ? n - off : w;
            unsigned char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
            if (p == MAP_FAILED) {
                perror("mmap");
                exit(1);
            }
            if (mode == 2) madvise(p, len, MADV_SEQUENTIAL);
            if (mode == 3) madvise(p, len, MADV_POPULATE_READ);
            for (size_t i = 0; i < len; i += stride) s += p[i];
            munmap(p, len);
        }
    }
    double t = now() - t0;
    sink = s;
    close(fd);
    return t;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [STRIDE]\n", argv[0]);
        return 2;
    }
    size_t stride = argc > 2 ? (size_t)atol(argv[2]) : 64;
    static const char *names[] = {"read()", "mmap", "mmap+SEQUENTIAL", "mmap+POPULATE_READ"};
    static const size_t sizes[] = {256 << 10, 1 << 20, 4 << 20, 16 << 20};
    char *buf = aligned_alloc(4096, 16 << 20);
    for (size_t i = 0; i < (16 << 20); i += 4096) buf[i] = 0;
    one(argv[1], 0, 1 << 20, stride, buf);
    printf("%s, a load every %zu bytes, median of 7 rounds\n", argv[1], stride);
    for (int mode = 0; mode < 4; mode++)
        for (int k = 0; k < 4; k++) {
            double t[7];
            for (int r = 0; r < 7; r++) t[r] = one(argv[1], mode, sizes[k], stride, buf);
            qsort(t, 7, sizeof t[0], cmp);
            printf("  %-20s %5zu KiB at a time: %7.1f ms\n", names[mode], sizes[k] >> 10, t[3] * 1e3);
        }
    return 0;
}
