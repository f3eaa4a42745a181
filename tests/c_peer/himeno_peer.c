/*
 * An independent C implementation of the Himeno kernel, written the way the
 * original C benchmark is: separate coefficient arrays, a wrk2 array and a
 * copy-back pass, float arithmetic, a double gosa sum. The integration test
 * compiles it without FP contraction and compares its gosa and field
 * fingerprint with the Rust solver's.
 *
 * usage: himeno_peer NI NJ NK ITERATIONS
 * prints: "<gosa with 17 significant digits> <fingerprint as 16 hex digits>"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s NI NJ NK ITERATIONS\n", argv[0]);
        return 2;
    }
    const long ni = atol(argv[1]), nj = atol(argv[2]), nk = atol(argv[3]);
    const long iters = atol(argv[4]);
    const long n = ni * nj * nk;
#define AT(i, j, k) (((i) * nj + (j)) * nk + (k))
    float *p = malloc(n * sizeof *p), *wrk2 = malloc(n * sizeof *wrk2);
    float *a[4], *b[3], *c[3], *bnd = malloc(n * sizeof(float)), *wrk1 = malloc(n * sizeof(float));
    for (int m = 0; m < 4; m++) a[m] = malloc(n * sizeof(float));
    for (int m = 0; m < 3; m++) b[m] = malloc(n * sizeof(float));
    for (int m = 0; m < 3; m++) c[m] = malloc(n * sizeof(float));
    const float a3 = (float)(1.0 / 6.0);
    for (long i = 0; i < ni; i++)
        for (long j = 0; j < nj; j++)
            for (long k = 0; k < nk; k++) {
                long x = AT(i, j, k);
                p[x] = (float)(i * i) / (float)((ni - 1) * (ni - 1));
                wrk2[x] = 0.0f;
                a[0][x] = a[1][x] = a[2][x] = 1.0f;
                a[3][x] = a3;
                b[0][x] = b[1][x] = b[2][x] = 0.0f;
                c[0][x] = c[1][x] = c[2][x] = 1.0f;
                bnd[x] = 1.0f;
                wrk1[x] = 0.0f;
            }
    const float omega = 0.8f;
    double gosa = 0.0;
    for (long it = 0; it < iters; it++) {
        gosa = 0.0;
        for (long i = 1; i < ni - 1; i++)
            for (long j = 1; j < nj - 1; j++)
                for (long k = 1; k < nk - 1; k++) {
                    long x = AT(i, j, k);
                    float s0 = a[0][x] * p[AT(i + 1, j, k)] + a[1][x] * p[AT(i, j + 1, k)]
                        + a[2][x] * p[AT(i, j, k + 1)]
                        + b[0][x] * (p[AT(i + 1, j + 1, k)] - p[AT(i + 1, j - 1, k)]
                                     - p[AT(i - 1, j + 1, k)] + p[AT(i - 1, j - 1, k)])
                        + b[1][x] * (p[AT(i, j + 1, k + 1)] - p[AT(i, j - 1, k + 1)]
                                     - p[AT(i, j + 1, k - 1)] + p[AT(i, j - 1, k - 1)])
                        + b[2][x] * (p[AT(i + 1, j, k + 1)] - p[AT(i - 1, j, k + 1)]
                                     - p[AT(i + 1, j, k - 1)] + p[AT(i - 1, j, k - 1)])
                        + c[0][x] * p[AT(i - 1, j, k)] + c[1][x] * p[AT(i, j - 1, k)]
                        + c[2][x] * p[AT(i, j, k - 1)] + wrk1[x];
                    float ss = (s0 * a[3][x] - p[x]) * bnd[x];
                    gosa += ss * ss;
                    wrk2[x] = p[x] + omega * ss;
                }
        for (long i = 1; i < ni - 1; i++)
            for (long j = 1; j < nj - 1; j++)
                for (long k = 1; k < nk - 1; k++)
                    p[AT(i, j, k)] = wrk2[AT(i, j, k)];
    }
    uint64_t fp = 0;
    for (long i = 1; i < ni - 1; i++)
        for (long j = 1; j < nj - 1; j++)
            for (long k = 1; k < nk - 1; k++) {
                union { float f; uint32_t u; } bits = { p[AT(i, j, k)] };
                fp += mix(mix((uint64_t)AT(i, j, k)) ^ (uint64_t)bits.u);
            }
    printf("%.17g %016llx\n", gosa, (unsigned long long)fp);
    return 0;
}
