// A plain C STREAM-style probe for `himeno bench stream` (issue 42): the
// four kernels Copy, Scale, Add and Triad over three f64 arrays, each kernel
// one `#pragma omp parallel for schedule(static)` per repetition, timed by a
// wall clock around that loop (all threads start together and the time
// ends when the last one has finished), the first repetition dropped, bytes
// counted as STREAM counts them (16 per element for Copy and Scale, 24 for
// Add and Triad; write-allocate traffic not counted). The arrays are first
// touched by the threads that use them, with the same static partition, on
// the pages McCalpin's STREAM gets (none advised), as `himeno bench stream`
// uses by default (pass 1 as the third argument to advise transparent huge
// pages, as `--huge-pages` does).
//
// Build: gcc -O3 -march=native -fopenmp -o triad notes/peer/triad.c
// Run:   OMP_NUM_THREADS=2 ./triad ELEMENTS [REPS [HUGE]]
//        (ELEMENTS per array: STREAM's rule is at least 4x the last-level
//        cache, e.g. 4 x 32 MiB / 8 = 16777216; REPS default 20)
// Prints one line per kernel:
//   triad best 36.12 GB/s avg 35.40 GB/s min 0.011150 avg 0.011376 max 0.011800 s
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static double *array(long n, int huge) {
  const long page = 2L << 20, bytes = (n * 8 + page - 1) / page * page;
  double *q = aligned_alloc(page, bytes);
  if (q && huge) madvise(q, bytes, MADV_HUGEPAGE);
  return q;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: triad ELEMENTS [REPS [HUGE]]\n");
    return 2;
  }
  const long n = atol(argv[1]);
  const int reps = argc > 2 ? atoi(argv[2]) : 20;
  const int huge = argc > 3 ? atoi(argv[3]) : 0;
  if (n < 1 || reps < 2) {
    fprintf(stderr, "triad: ELEMENTS must be >= 1 and REPS >= 2\n");
    return 2;
  }
  double *a = array(n, huge), *b = array(n, huge), *c = array(n, huge);
  if (!a || !b || !c) {
    fprintf(stderr, "triad: out of memory\n");
    return 1;
  }
  const double s = 3.0;
#pragma omp parallel for schedule(static)
  for (long j = 0; j < n; j++) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
  const char *name[4] = {"copy", "scale", "add", "triad"};
  const double bytes[4] = {16.0 * n, 16.0 * n, 24.0 * n, 24.0 * n};
  double best[4] = {1e30, 1e30, 1e30, 1e30}, sum[4] = {0}, worst[4] = {0};
  for (int r = 0; r < reps; r++) {
    double t[4];
    t[0] = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) c[j] = a[j];
    t[0] = omp_get_wtime() - t[0];
    t[1] = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) b[j] = s * c[j];
    t[1] = omp_get_wtime() - t[1];
    t[2] = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
    t[2] = omp_get_wtime() - t[2];
    t[3] = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) a[j] = b[j] + s * c[j];
    t[3] = omp_get_wtime() - t[3];
    if (r == 0) continue;
    for (int k = 0; k < 4; k++) {
      best[k] = t[k] < best[k] ? t[k] : best[k];
      worst[k] = t[k] > worst[k] ? t[k] : worst[k];
      sum[k] += t[k];
    }
  }
  // Every element went through the same operations: check against scalars.
  double ea = 1.0, eb = 2.0, ec = 0.0;
  for (int r = 0; r < reps; r++) {
    ec = ea;
    eb = s * ec;
    ec = ea + eb;
    ea = eb + s * ec;
  }
  long bad = 0;
#pragma omp parallel for reduction(+ : bad)
  for (long j = 0; j < n; j++) bad += a[j] != ea || b[j] != eb || c[j] != ec;
  if (bad) {
    fprintf(stderr, "triad: %ld elements differ from the expected values\n", bad);
    return 1;
  }
  printf("threads %d elements %ld reps %d huge %d\n", omp_get_max_threads(), n, reps, huge);
  for (int k = 0; k < 4; k++)
    printf("%s best %.2f GB/s avg %.2f GB/s min %.6f avg %.6f max %.6f s\n", name[k],
           bytes[k] / best[k] / 1e9, bytes[k] * (reps - 1) / sum[k] / 1e9, best[k],
           sum[k] / (reps - 1), worst[k]);
  return 0;
}
