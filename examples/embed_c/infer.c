/*
** infer.c -- a C host with no Lua: loads an MLP checkpoint (Linear, ReLU, Linear as
** nn.Sequential names them: 0.weight, 0.bias, 2.weight, 2.bias) from a safetensors file and
** prints the logits and softmax probabilities of each input row.
**
**   infer MODEL.safetensors X1 X2 ...    (a multiple of the model's input width)
**
** Build (see README, "Without Lua"):
**   cc -std=c11 -Iinclude examples/embed_c/infer.c build/liblantern.a \
**      -lopenblas -lz -lm -lpthread -o infer
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lantern_ops.h"

enum { EXIT_USAGE = 2, CLASS_DIM = 1 };

/* Every tensor the forward makes, released together at the end. */
enum { T_X64, T_X, T_W1T, T_H, T_R, T_W2T, T_Y, T_P, T_N };

static int report(lt_ctx *ctx, const char *what) {
  fprintf(stderr, "infer: %s: %s\n", what, lt_errmsg(ctx));
  return EXIT_FAILURE;
}

/* A 2-d weight and 1-d bias of one Linear layer, borrowed from the checkpoint. */
static int get_linear(const lt_named_tensor *list, size_t n, const char *wname,
                      const char *bname, lt_tensor **w, lt_tensor **b) {
  *w = lt_named_find(list, n, wname);
  *b = lt_named_find(list, n, bname);
  if (!*w || !*b || lt_ndim(*w) != 2 || lt_ndim(*b) != 1) {
    fprintf(stderr, "infer: the checkpoint has no Linear layer '%s' / '%s' (2-d weight, 1-d "
            "bias)\n", wname, bname);
    return -1;
  }
  return 0;
}

/* The rows of a 2-d tensor, one line each after a label, read as float64 (a contiguous copy
** in that dtype, or t itself when it is one). */
static int print_rows(lt_ctx *ctx, const char *label, lt_tensor *t) {
  lt_tensor *d, *c;
  if (lt_to_dtype(ctx, &d, t, LT_FLOAT64)) return report(ctx, label);
  int rc = lt_contiguous(ctx, &c, d);
  lt_release(d);
  if (rc) return report(ctx, label);
  const double *v = lt_data(c);
  int64_t rows = lt_size(c, 0), cols = lt_size(c, 1);
  for (int64_t i = 0; i < rows; i++) {
    printf("%s %lld:", label, (long long)i);
    for (int64_t j = 0; j < cols; j++) printf(" %.9g", v[i * cols + j]);
    printf("\n");
  }
  lt_release(c);
  return EXIT_SUCCESS;
}

/* Parses argv's numbers into x (count of them); -1 on one that is not a number. */
static int parse_inputs(int count, char **args, double *x) {
  for (int i = 0; i < count; i++) {
    char *end;
    errno = 0;
    x[i] = strtod(args[i], &end);
    if (end == args[i] || *end || errno) {
      fprintf(stderr, "infer: input %d ('%s') is not a number\n", i + 1, args[i]);
      return -1;
    }
  }
  return 0;
}

/* y = x @ w^T + b: a Linear layer as one addmm on a transposed view of the weight. */
static int linear(lt_ctx *ctx, lt_tensor **y, lt_tensor **wt, lt_tensor *x, lt_tensor *w,
                  lt_tensor *b) {
  if (lt_transpose(ctx, wt, w, 0, 1)) return -1;
  return lt_addmm(ctx, y, b, x, *wt, 1.0, 1.0);
}

static int forward(lt_ctx *ctx, lt_tensor **t, const lt_named_tensor *list, size_t n,
                   double *xv, int count) {
  lt_tensor *w1, *b1, *w2, *b2;
  if (get_linear(list, n, "0.weight", "0.bias", &w1, &b1) ||
      get_linear(list, n, "2.weight", "2.bias", &w2, &b2))
    return EXIT_FAILURE;
  int64_t in = lt_size(w1, 1);
  if (count == 0 || count % in) {
    fprintf(stderr, "infer: got %d inputs, expected a positive multiple of %lld\n", count,
            (long long)in);
    return EXIT_FAILURE;
  }
  /* the host's numbers wrapped without a copy, then converted to the model's dtype */
  int64_t shape[2] = {count / in, in};
  if (lt_from_blob(ctx, &t[T_X64], xv, LT_FLOAT64, 2, shape, NULL, NULL, NULL) ||
      lt_to_dtype(ctx, &t[T_X], t[T_X64], lt_type(w1)))
    return report(ctx, "input");
  if (linear(ctx, &t[T_H], &t[T_W1T], t[T_X], w1, b1)) return report(ctx, "layer 0");
  if (lt_unary(ctx, &t[T_R], LT_RELU, t[T_H], 0, 0)) return report(ctx, "relu");
  if (linear(ctx, &t[T_Y], &t[T_W2T], t[T_R], w2, b2)) return report(ctx, "layer 2");
  if (lt_softmax(ctx, &t[T_P], t[T_Y], CLASS_DIM)) return report(ctx, "softmax");
  if (print_rows(ctx, "logits", t[T_Y])) return EXIT_FAILURE;
  return print_rows(ctx, "probs", t[T_P]);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: infer MODEL.safetensors X1 X2 ...\n");
    return EXIT_USAGE;
  }
  int count = argc - 2;
  double *xv = malloc(sizeof *xv * (size_t)count);
  if (!xv || parse_inputs(count, argv + 2, xv)) {
    free(xv);
    return EXIT_FAILURE;
  }
  lt_ctx *ctx = lt_ctx_new();
  if (!ctx) {
    free(xv);
    return EXIT_FAILURE;
  }
  lt_set_grad_enabled(ctx, false);   /* inference: no graph is recorded */
  lt_named_tensor *list = NULL;
  size_t n = 0;
  int rc;
  lt_tensor *t[T_N] = {0};
  if (lt_load_safetensors(ctx, argv[1], &list, &n))
    rc = report(ctx, "loading the checkpoint");
  else
    rc = forward(ctx, t, list, n, xv, count);
  for (int i = 0; i < T_N; i++) lt_release(t[i]);
  lt_named_free(list, n);
  lt_ctx_free(ctx);
  free(xv);
  return rc;
}
