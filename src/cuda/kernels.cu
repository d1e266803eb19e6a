// kernels.cu -- Lantern's CUDA kernels: strided elementwise copy (with dtype conversion and
// broadcasting through zero strides), fill, and float32 binary and unary ops. One thread per
// output element, grid-stride, on the default stream (copies to the host synchronise with it).
#include <cuda_runtime.h>
#include <stdint.h>

#include "kern.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// The element offset of output position i in operand k.
__device__ inline int64_t offset_of(const ltc_geom &g, int k, int64_t i) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; d--) {
    int64_t s = g.size[d];
    off += (i % s) * g.stride[k][d];
    i /= s;
  }
  return off;
}

template <typename T> __device__ inline T *at(const ltc_geom &g, int k, int64_t i) {
  return static_cast<T *>(g.data[k]) + offset_of(g, k, i);
}

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

// the core's conversions: a bool is nonzero; a float to int64 truncates
template <typename O, typename S> __device__ inline O convert(S v) { return static_cast<O>(v); }
template <> __device__ inline bool convert<bool, float>(float v) { return v != 0.0f; }
template <> __device__ inline bool convert<bool, double>(double v) { return v != 0.0; }
template <> __device__ inline bool convert<bool, int64_t>(int64_t v) { return v != 0; }

template <typename O, typename S> __global__ void copy_kernel(ltc_geom g) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.numel;
       i += (int64_t)gridDim.x * blockDim.x)
    *at<O>(g, 0, i) = convert<O, S>(*at<const S>(g, 1, i));
}

template <typename O> __global__ void fill_kernel(ltc_geom g, O v) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.numel;
       i += (int64_t)gridDim.x * blockDim.x)
    *at<O>(g, 0, i) = v;
}

__device__ inline float binop(int op, float a, float b) {
  switch (op) {
  case LTC_ADD: return a + b;
  case LTC_SUB: return a - b;
  case LTC_MUL: return a * b;
  case LTC_DIV: return a / b;
  case LTC_MAX: return (a != a || b != b) ? a + b : fmaxf(a, b);   // NaN propagates, as torch
  case LTC_MIN: return (a != a || b != b) ? a + b : fminf(a, b);
  default: return powf(a, b);
  }
}

__device__ inline float unop(int op, float x) {
  switch (op) {
  case LTC_NEG: return -x;
  case LTC_ABS: return fabsf(x);
  case LTC_EXP: return expf(x);
  case LTC_LOG: return logf(x);
  case LTC_SQRT: return sqrtf(x);
  case LTC_RSQRT: return rsqrtf(x);
  case LTC_SIN: return sinf(x);
  case LTC_COS: return cosf(x);
  case LTC_TANH: return tanhf(x);
  case LTC_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case LTC_RELU: return x > 0.0f ? x : (x != x ? x : 0.0f);
  case LTC_RECIPROCAL: return 1.0f / x;
  default: return x * x;
  }
}

__global__ void binary_kernel(int op, ltc_geom g) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.numel;
       i += (int64_t)gridDim.x * blockDim.x)
    *at<float>(g, 0, i) = binop(op, *at<const float>(g, 1, i), *at<const float>(g, 2, i));
}

__global__ void unary_kernel(int op, ltc_geom g) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.numel;
       i += (int64_t)gridDim.x * blockDim.x)
    *at<float>(g, 0, i) = unop(op, *at<const float>(g, 1, i));
}

__global__ void binary_flat_kernel(int op, int64_t n, float *out, const float *a, int sa,
                                   const float *b, int sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = binop(op, a[i * sa], b[i * sb]);
}

template <typename O> int copy_from(const ltc_geom *g, enum ltc_dtype src) {
  int nb = blocks_for(g->numel);
  switch (src) {
  case LTC_F32: copy_kernel<O, float><<<nb, kThreads>>>(*g); break;
  case LTC_F64: copy_kernel<O, double><<<nb, kThreads>>>(*g); break;
  case LTC_I64: copy_kernel<O, int64_t><<<nb, kThreads>>>(*g); break;
  default: copy_kernel<O, bool><<<nb, kThreads>>>(*g); break;
  }
  return cudaGetLastError();
}

}  // namespace

extern "C" int ltc_copy(const ltc_geom *g, enum ltc_dtype out, enum ltc_dtype src) {
  if (g->numel == 0) return 0;
  switch (out) {
  case LTC_F32: return copy_from<float>(g, src);
  case LTC_F64: return copy_from<double>(g, src);
  case LTC_I64: return copy_from<int64_t>(g, src);
  default: return copy_from<bool>(g, src);
  }
}

extern "C" int ltc_fill(const ltc_geom *g, enum ltc_dtype out, double v) {
  if (g->numel == 0) return 0;
  int nb = blocks_for(g->numel);
  switch (out) {
  case LTC_F32: fill_kernel<float><<<nb, kThreads>>>(*g, static_cast<float>(v)); break;
  case LTC_F64: fill_kernel<double><<<nb, kThreads>>>(*g, v); break;
  case LTC_I64: fill_kernel<int64_t><<<nb, kThreads>>>(*g, static_cast<int64_t>(v)); break;
  default: fill_kernel<bool><<<nb, kThreads>>>(*g, v != 0.0); break;
  }
  return cudaGetLastError();
}

extern "C" int ltc_binary_f32(enum ltc_binop op, const ltc_geom *g) {
  if (g->numel == 0) return 0;
  binary_kernel<<<blocks_for(g->numel), kThreads>>>(op, *g);
  return cudaGetLastError();
}

extern "C" int ltc_unary_f32(enum ltc_unop op, const ltc_geom *g) {
  if (g->numel == 0) return 0;
  unary_kernel<<<blocks_for(g->numel), kThreads>>>(op, *g);
  return cudaGetLastError();
}

extern "C" int ltc_binary_flat_f32(enum ltc_binop op, int64_t n, float *out, const float *a,
                                   int sa, const float *b, int sb) {
  if (n == 0) return 0;
  binary_flat_kernel<<<blocks_for(n), kThreads>>>(op, n, out, a, sa, b, sb);
  return cudaGetLastError();
}
