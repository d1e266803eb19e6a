/*
** ops_c_api.c -- spec/c_api_spec.lua's host: the op API's error paths and the C checkpoint
** functions, with no Lua. Each check prints one line "name: ok: <message>" or
** "name: FAIL: <why>"; the spec reads them. argv[1]: a scratch path for a written checkpoint.
*/
#include <stdio.h>
#include <string.h>

#include "lantern_ops.h"

static int failures;

static void check(const char *name, bool ok, const char *detail) {
  printf("%s: %s: %s\n", name, ok ? "ok" : "FAIL", detail ? detail : "");
  if (!ok) failures++;
}

/* A float32 (rows, cols) tensor holding 0, 1, 2, ... */
static lt_tensor *counting(lt_ctx *ctx, int64_t rows, int64_t cols) {
  lt_tensor *t;
  int64_t shape[2] = {rows, cols};
  if (lt_empty(ctx, &t, LT_FLOAT32, 2, shape)) return NULL;
  float *v = lt_data(t);
  for (int64_t i = 0; i < rows * cols; i++) v[i] = (float)i;
  return t;
}

static bool still_counting(const lt_tensor *t) {
  const float *v = lt_data(t);
  for (int64_t i = 0; i < lt_numel(t); i++)
    if (v[i] != (float)i) return false;
  return true;
}

/* A failed op returns -1, leaves *out as it was and its inputs' values alone. */
static void failed_op(const char *name, int rc, lt_tensor *out, lt_ctx *ctx, lt_tensor *a,
                      lt_tensor *b) {
  bool ok = rc == -1 && out == NULL && still_counting(a) && still_counting(b);
  check(name, ok, lt_errmsg(ctx));
}

static void error_paths(lt_ctx *ctx) {
  lt_tensor *a = counting(ctx, 2, 3), *b = counting(ctx, 4, 5), *out = NULL;
  failed_op("matmul", lt_matmul(ctx, &out, a, b), out, ctx, a, b);
  failed_op("addmm", lt_addmm(ctx, &out, a, a, b, 1.0, 1.0), out, ctx, a, b);
  failed_op("binary", lt_binary(ctx, &out, LT_ADD, a, b), out, ctx, a, b);
  failed_op("binary_", lt_binary_(ctx, LT_MUL, a, b), out, ctx, a, b);
  failed_op("softmax", lt_softmax(ctx, &out, a, 2), out, ctx, a, b);
  int64_t five[1] = {5};
  failed_op("view", lt_view(ctx, &out, a, 1, five), out, ctx, a, b);
  lt_release(a);
  lt_release(b);
}

/* The largest |a - b| over the largest |b|, a float32 and b float64 of one shape. */
static double rel_diff(const lt_tensor *a, const lt_tensor *b) {
  const float *x = lt_data(a);
  const double *y = lt_data(b);
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < lt_numel(b); i++) {
    double d = x[i] - y[i];
    if (d < 0) d = -d;
    if (d > worst) worst = d;
    if ((y[i] < 0 ? -y[i] : y[i]) > scale) scale = y[i] < 0 ? -y[i] : y[i];
  }
  return scale > 0 ? worst / scale : worst;
}

/* y = conv2d(x, w) with padding_extra (zeros after the image beyond the padding), and its
** input and weight gradients: in float32 (shapes that the Winograd path would take but for
** padding_extra) as in float64 (im2col). */
static void conv_padding_extra(lt_ctx *ctx) {
  int64_t xs[4] = {2, 16, 5, 6}, ws[4] = {16, 16, 3, 3};
  lt_tensor *x[2] = {NULL, NULL}, *w[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
  lt_tensor *ones[2] = {NULL, NULL};
  lt_conv_args a;
  lt_conv_args_init(&a);
  a.padding[0] = a.padding[1] = 1;
  a.padding_extra[0] = a.padding_extra[1] = 1;
  bool ok = true;
  for (int k = 0; k < 2 && ok; k++) {
    lt_dtype dt = k ? LT_FLOAT64 : LT_FLOAT32;
    ok = !lt_empty(ctx, &x[k], dt, 4, xs) && !lt_empty(ctx, &w[k], dt, 4, ws);
    for (int64_t i = 0; ok && i < lt_numel(x[k]); i++) {
      double v = (double)((i * 37) % 11) / 11.0 - 0.5;
      if (k) ((double *)lt_data(x[k]))[i] = v; else ((float *)lt_data(x[k]))[i] = (float)v;
    }
    for (int64_t i = 0; ok && i < lt_numel(w[k]); i++) {
      double v = (double)((i * 53) % 13) / 13.0 - 0.5;
      if (k) ((double *)lt_data(w[k]))[i] = v; else ((float *)lt_data(w[k]))[i] = (float)v;
    }
    ok = ok && !lt_set_requires_grad(ctx, x[k], true) && !lt_set_requires_grad(ctx, w[k], true) &&
         !lt_conv2d(ctx, &y[k], x[k], w[k], NULL, &a) &&
         !lt_full(ctx, &ones[k], dt, lt_ndim(y[k]), lt_sizes(y[k]), 1.0) &&
         !lt_backward(ctx, 1, &y[k], &ones[k], false, 0, NULL, NULL, false);
  }
  char detail[160];
  if (ok) {
    double dy = rel_diff(y[0], y[1]), dx = rel_diff(lt_grad(x[0]), lt_grad(x[1]));
    double dw = rel_diff(lt_grad(w[0]), lt_grad(w[1]));
    snprintf(detail, sizeof detail, "output %lld x %lld, differences %.1e %.1e %.1e",
             (long long)lt_sizes(y[0])[2], (long long)lt_sizes(y[0])[3], dy, dx, dw);
    ok = lt_sizes(y[0])[2] == 6 && lt_sizes(y[0])[3] == 7 && dy < 1e-5 && dx < 1e-5 && dw < 1e-5;
  } else {
    snprintf(detail, sizeof detail, "%s", lt_errmsg(ctx));
  }
  check("conv_padding_extra", ok, detail);
  for (int k = 0; k < 2; k++) {
    lt_release(x[k]);
    lt_release(w[k]);
    lt_release(y[k]);
    lt_release(ones[k]);
  }
}

/* Saves two tensors, loads them back by name, and checks the writer's refusals. */
static void checkpoints(lt_ctx *ctx, const char *path) {
  lt_tensor *a = counting(ctx, 2, 3), *b = counting(ctx, 1, 4);
  lt_named_tensor list[2] = {{.name = "layer.weight", .tensor = a},
                             {.name = "layer.bias", .tensor = b}};
  int rc = lt_save_safetensors(ctx, path, list, 2);
  check("save", rc == 0, rc ? lt_errmsg(ctx) : path);
  lt_named_tensor *got = NULL;
  size_t n = 0;
  rc = lt_load_safetensors(ctx, path, &got, &n);
  bool same = false;
  lt_tensor *w = rc ? NULL : lt_named_find(got, n, "layer.weight");
  lt_tensor *bias = rc ? NULL : lt_named_find(got, n, "layer.bias");
  if (w && bias && lt_equal(ctx, &same, w, a) == 0 && same) lt_equal(ctx, &same, bias, b);
  check("load", rc == 0 && n == 2 && same && !lt_named_find(got, n, "missing"),
        rc ? lt_errmsg(ctx) : "two tensors, equal values");
  lt_named_free(got, n);
  got = NULL;
  rc = lt_load_state_dict(ctx, path, &got, &n);   /* it reads safetensors too */
  check("load_state_dict", rc == 0 && n == 2, rc ? lt_errmsg(ctx) : "two tensors");
  lt_named_free(got, n);

  lt_named_tensor twice[2] = {{.name = "x", .tensor = a}, {.name = "x", .tensor = b}};
  rc = lt_save_safetensors(ctx, path, twice, 2);
  check("save_duplicate", rc == -1 && strstr(lt_errmsg(ctx), "'x'"), lt_errmsg(ctx));
  got = NULL;
  n = 7;
  rc = lt_load_safetensors(ctx, "/nonexistent/model.safetensors", &got, &n);
  check("load_missing", rc == -1 && got == NULL && n == 7 &&
        strstr(lt_errmsg(ctx), "/nonexistent/model.safetensors"), lt_errmsg(ctx));
  check("inputs_kept", still_counting(a) && still_counting(b), "");
  lt_release(a);
  lt_release(b);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: ops_c_api SCRATCH.safetensors\n");
    return 2;
  }
  lt_ctx *ctx = lt_ctx_new();
  if (!ctx) return 1;
  error_paths(ctx);
  conv_padding_extra(ctx);
  checkpoints(ctx, argv[1]);
  lt_ctx_free(ctx);
  return failures ? 1 : 0;
}
