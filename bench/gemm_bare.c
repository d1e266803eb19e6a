/* Bare OpenBLAS sgemm at n = 256, 512, 1024: the ceiling Lantern's matmul is measured against. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  openblas_set_num_threads(threads);
  for (int n = 256; n <= 1024; n *= 2) {
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
    for (int w = 0; w < 3; w++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    int reps = 0;
    double t0 = now(), t;
    do {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
      reps++;
      t = now() - t0;
    } while (t < 0.3 || reps < 3);
    printf("gemm_%d_gflops %.6g\n", n, 2.0 * n * n * n / (t / reps) / 1e9);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
