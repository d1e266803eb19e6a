/*
** cpu/ternary_float.h -- template: the three-operand gradient formulas o = f(g, x, y) of one
** float type and the kernel body that runs them. Included by ternary.c with LT_T (float or
** double) and LT_S (libm's suffix: f or nothing).
*/
#define TF(n) LT_EW_PASTE(n##_, LT_T)
#define M(f) LT_EW_PASTE(f, LT_S)

typedef LT_T (*TF(tfn))(LT_T g, LT_T x, LT_T y);

/* operands: out, g, x, y (y possibly one broadcast scalar) */
LT_EW_INLINE void TF(tloop)(char **d, const int64_t *st, int64_t n, TF(tfn) f) {
  const int64_t es = (int64_t)sizeof(LT_T);
  LT_T *o = (LT_T *)d[0];
  const LT_T *g = (const LT_T *)d[1], *a = (const LT_T *)d[2], *b = (const LT_T *)d[3];
  if (st[0] == es && st[1] == es && st[2] == es && st[3] == es) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) o[i] = f(g[i], a[i], b[i]);
  } else if (st[0] == es && st[1] == es && st[2] == es && st[3] == 0) {
    const LT_T y = *b;
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) o[i] = f(g[i], a[i], y);
  } else {
    char *po = d[0];
    const char *pg = d[1], *pa = d[2], *pb = d[3];
    for (int64_t i = 0; i < n; i++)
      *(LT_T *)(po + i * st[0]) = f(*(const LT_T *)(pg + i * st[1]),
                                    *(const LT_T *)(pa + i * st[2]),
                                    *(const LT_T *)(pb + i * st[3]));
  }
}

LT_EW_INLINE LT_T TF(t_div_b)(LT_T g, LT_T x, LT_T y) { return -g * x / (y * y); }
/* g y x^(y-1), associated as PyTorch's g * (y * x.pow(y - 1)); with one scalar y, x^(y-1) takes
** pow's cheaper forms (binary_float.h's bin_pow), as PyTorch's does */
LT_EW_INLINE LT_T TF(t_pow_a)(LT_T g, LT_T x, LT_T y) {
  return y == 0 ? 0 : g * (y * M(pow)(x, y - 1));
}
LT_EW_INLINE LT_T TF(t_pow_a2)(LT_T g, LT_T x, LT_T y) { return g * (y * x); }
LT_EW_INLINE LT_T TF(t_pow_a3)(LT_T g, LT_T x, LT_T y) { return g * (y * (x * x)); }
LT_EW_INLINE LT_T TF(t_pow_ahalf)(LT_T g, LT_T x, LT_T y) { return g * (y * (1 / M(sqrt)(x))); }
LT_EW_INLINE LT_T TF(t_pow_am1)(LT_T g, LT_T x, LT_T y) { return g * (y * (1 / (x * x))); }
LT_EW_INLINE void TF(ter_pow_a)(char **d, const int64_t *st, int64_t n) {
  /* a switch, as binary_float.h's bin_pow */
  switch (st[3] == 0 ? ltC_pow_form(*(const LT_T *)d[3]) : LT_POW_ANY) {
    case LT_POW_2: TF(tloop)(d, st, n, TF(t_pow_a2)); break;
    case LT_POW_3: TF(tloop)(d, st, n, TF(t_pow_a3)); break;
    case LT_POW_HALF: TF(tloop)(d, st, n, TF(t_pow_ahalf)); break;
    case LT_POW_M1: TF(tloop)(d, st, n, TF(t_pow_am1)); break;
    default: TF(tloop)(d, st, n, TF(t_pow_a)); break;
  }
}
LT_EW_INLINE LT_T TF(t_pow_b)(LT_T g, LT_T x, LT_T y) {
  return (x == 0 && y >= 0) ? 0 : g * M(pow)(x, y) * M(log)(x);
}
LT_EW_INLINE LT_T TF(t_atan2_a)(LT_T g, LT_T x, LT_T y) { return g * y / (x * x + y * y); }
LT_EW_INLINE LT_T TF(t_atan2_b)(LT_T g, LT_T x, LT_T y) { return -g * x / (x * x + y * y); }
/* ties share the gradient */
LT_EW_INLINE LT_T TF(t_max_a)(LT_T g, LT_T x, LT_T y) {
  return x == y ? g * (LT_T)0.5 : (x < y ? 0 : g);
}
LT_EW_INLINE LT_T TF(t_max_b)(LT_T g, LT_T x, LT_T y) {
  return x == y ? g * (LT_T)0.5 : (x > y ? 0 : g);
}
LT_EW_INLINE LT_T TF(t_fmod_b)(LT_T g, LT_T x, LT_T y) { return -g * M(trunc)(x / y); }
LT_EW_INLINE LT_T TF(t_rem_b)(LT_T g, LT_T x, LT_T y) { return -g * M(floor)(x / y); }

LT_EW_INLINE void TF(ter_body)(enum ltK_ternary_op op, char **d, const int64_t *st, int64_t n) {
#define L(f) TF(tloop)(d, st, n, TF(f)); break
  switch (op) {
    case LT_T_DIV_B: L(t_div_b);
    case LT_T_POW_A: TF(ter_pow_a)(d, st, n); break;
    case LT_T_POW_B: L(t_pow_b);
    case LT_T_ATAN2_A: L(t_atan2_a);
    case LT_T_ATAN2_B: L(t_atan2_b);
    case LT_T_MAX_A:
    case LT_T_MIN_B: L(t_max_a);   /* min_b has max_a's formula, min_a max_b's */
    case LT_T_MAX_B:
    case LT_T_MIN_A: L(t_max_b);
    case LT_T_FMOD_B: L(t_fmod_b);
    case LT_T_REM_B: L(t_rem_b);
    default: break;
  }
#undef L
}

#undef TF
#undef M
