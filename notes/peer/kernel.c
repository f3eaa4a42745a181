// A plain C peer of himeno's classic sweep, for notes/cpu-perf.md (the
// thirteenth session): the same 19-point update in the specification's
// operation order, on the same packed coefficient layout as the CPU backend
// ([row][block of 16 points][12 coefficients][16]), AVX2 8-point steps, the
// squared residuals summed in f64 lanes, ordinary stores, OpenMP threads
// over i planes. No per-row tails: rows must have a multiple of 16 owned
// points (nk = 16 q + 2). It times whole sweeps and prints the best and the
// mean of 5 runs of `reps` sweeps (himeno's MFLOPS is a mean over its timed
// loop); its answers are not checked (see himeno for that). Its arrays are
// on transparent huge pages, as himeno's fields are: without them this peer
// ran about 7 % slower from memory (notes/cpu-perf.md, seventeenth session).
//
// GCC contracts a * b + c into fused multiply-adds by default
// (-ffp-contract=fast), which changes the arithmetic: build with
// -ffp-contract=off for the specification's (and himeno's) operations.
//
// Build: gcc -O3 -march=native -ffp-contract=off -fopenmp -o kernel notes/peer/kernel.c
// Run:   OMP_NUM_THREADS=2 ./kernel NI NJ NK REPS   (e.g. 129 129 258 8)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define L(q) _mm256_loadu_ps(q)
#define ADD _mm256_add_ps
#define SUB _mm256_sub_ps
#define MUL _mm256_mul_ps

static int NI, NJ, NK;

// `bytes` rounded up to whole 2 MiB pages, aligned to one and advised to be
// backed by huge pages before the first write.
static float *huge(long bytes) {
  const long page = 2L << 20, whole = (bytes + page - 1) / page * page;
  float *q = aligned_alloc(page, whole);
  if (q) madvise(q, whole, MADV_HUGEPAGE);
  return q;
}

// One sweep of p into o; returns the sum of squared residuals.
static double sweep(const float *restrict co, const float *restrict p, float *restrict o) {
  const long pl = (long)NJ * NK;
  const int nb = (NK - 2) / 16;
  double res = 0;
#pragma omp parallel reduction(+ : res)
  {
    __m256d g0 = _mm256_setzero_pd(), g1 = g0;
    const __m256 om = _mm256_set1_ps(0.8f);
#pragma omp for schedule(static)
    for (int i = 1; i < NI - 1; i++)
      for (int j = 1; j < NJ - 1; j++) {
        const float *c = co + ((long)(i - 1) * (NJ - 2) + (j - 1)) * nb * 192;
        const long r = i * pl + (long)j * NK + 1;
        for (int b = 0; b < nb; b++)
          for (int h = 0; h < 2; h++) {
            const long x = r + b * 16 + h * 8;
            const float *q = c + b * 192 + h * 8;
            __m256 s0 = MUL(L(q), L(p + x + pl));
            s0 = ADD(s0, MUL(L(q + 16), L(p + x + NK)));
            s0 = ADD(s0, MUL(L(q + 32), L(p + x + 1)));
            s0 = ADD(s0, MUL(L(q + 64), ADD(SUB(SUB(L(p + x + pl + NK), L(p + x + pl - NK)), L(p + x - pl + NK)), L(p + x - pl - NK))));
            s0 = ADD(s0, MUL(L(q + 80), ADD(SUB(SUB(L(p + x + NK + 1), L(p + x - NK + 1)), L(p + x + NK - 1)), L(p + x - NK - 1))));
            s0 = ADD(s0, MUL(L(q + 96), ADD(SUB(SUB(L(p + x + pl + 1), L(p + x - pl + 1)), L(p + x + pl - 1)), L(p + x - pl - 1))));
            s0 = ADD(s0, MUL(L(q + 112), L(p + x - pl)));
            s0 = ADD(s0, MUL(L(q + 128), L(p + x - NK)));
            s0 = ADD(s0, MUL(L(q + 144), L(p + x - 1)));
            s0 = ADD(s0, L(q + 160));
            const __m256 pc = L(p + x);
            const __m256 ss = MUL(SUB(MUL(s0, L(q + 48)), pc), L(q + 176));
            const __m256 sq = MUL(ss, ss);
            g0 = _mm256_add_pd(g0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
            g1 = _mm256_add_pd(g1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
            _mm256_storeu_ps(o + x, ADD(pc, MUL(om, ss)));
          }
      }
    double g[4];
    _mm256_storeu_pd(g, _mm256_add_pd(g0, g1));
    res += g[0] + g[1] + g[2] + g[3];
  }
  return res;
}

int main(int argc, char **argv) {
  if (argc != 5 || (atoi(argv[3]) - 2) % 16 != 0) {
    fprintf(stderr, "usage: %s NI NJ NK REPS (NK - 2 a multiple of 16)\n", argv[0]);
    return 2;
  }
  NI = atoi(argv[1]), NJ = atoi(argv[2]), NK = atoi(argv[3]);
  const int reps = atoi(argv[4]);
  const long n = (long)NI * NJ * NK, nb = (NK - 2) / 16;
  const long nc = (long)(NI - 2) * (NJ - 2) * nb * 192;
  const long pts = (long)(NI - 2) * (NJ - 2) * nb * 16;
  float *co = huge(nc * 4);
  float *p = huge(n * 4);
  float *o = huge(n * 4);
  if (!co || !p || !o) return 1;
  // First touch by the threads that sweep the same planes.
#pragma omp parallel for schedule(static)
  for (int i = 0; i < NI; i++)
    for (long v = (long)i * NJ * NK; v < (long)(i + 1) * NJ * NK; v++) p[v] = o[v] = (float)(i * i) / ((NI - 1) * (NI - 1));
#pragma omp parallel for schedule(static)
  for (int i = 1; i < NI - 1; i++)
    for (long v = (long)(i - 1) * (NJ - 2) * nb * 192; v < (long)i * (NJ - 2) * nb * 192; v++)
      co[v] = (v % 192) / 16 == 3 ? 1.0f / 6.0f : (v % 192) / 16 == 11 ? 1.0f : (v % 192) / 16 < 3 ? 1.0f : 0.0f;
  double s = sweep(co, p, o), best = 1e9, sum = 0;
  for (int k = 0; k < 5; k++) {
    const double t0 = now();
    for (int r = 0; r < reps; r++) {
      s += sweep(co, p, o);
      float *t = p;
      p = o, o = t;
    }
    const double t = (now() - t0) / reps;
    if (t < best) best = t;
    sum += t;
  }
  const double mean = sum / 5;
  printf("%dx%dx%d MFLOPS %.0f GB/s(56 B/point) %.2f ns/point %.3f mean: MFLOPS %.0f GB/s %.2f (gosa sum %g)\n",
         NI, NJ, NK, 34.0 * pts / best / 1e6, 56.0 * pts / best / 1e9, best / pts * 1e9, 34.0 * pts / mean / 1e6,
         56.0 * pts / mean / 1e9, s);
  return 0;
}
