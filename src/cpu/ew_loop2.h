/*
** cpu/ew_loop2.h -- template: the row loop of a binary formula, o = f(x, y, params).
** Included with LT_LT (input type), LT_LOT (output type), LT_LNAME (the function's name) and
** LT_LP (the parameter struct); undefines them.
*/
typedef LT_LOT (*LT_EW_PASTE(LT_LNAME, _fn))(LT_LT x, LT_LT y, const LT_LP *p);

LT_EW_INLINE void LT_LNAME(char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                           const LT_LP *p, LT_EW_PASTE(LT_LNAME, _fn) f) {
  const int64_t ti = (int64_t)sizeof(LT_LT), to = (int64_t)sizeof(LT_LOT);
  LT_LOT *o = (LT_LOT *)d[0];
  const LT_LT *a = (const LT_LT *)d[1], *b = (const LT_LT *)d[2];
  if (so == to && sa == ti && sb == ti) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) o[i] = f(a[i], b[i], p);
  } else if (so == to && sa == ti && sb == 0) {
    const LT_LT y = *b;
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) o[i] = f(a[i], y, p);
  } else if (so == to && sa == 0 && sb == ti) {
    const LT_LT x = *a;
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) o[i] = f(x, b[i], p);
  } else {   /* strided: through blocks on the stack, so that f runs as the loops above do */
    LT_LT xa[LT_EW_GATHER], xb[LT_EW_GATHER];
    LT_LOT xo[LT_EW_GATHER];
    char *po = d[0];
    const char *pa = d[1], *pb = d[2];
    for (int64_t i0 = 0; i0 < n; i0 += LT_EW_GATHER) {
      int64_t m = n - i0 < LT_EW_GATHER ? n - i0 : LT_EW_GATHER;
      for (int64_t i = 0; i < m; i++) xa[i] = *(const LT_LT *)(pa + (i0 + i) * sa);
      for (int64_t i = 0; i < m; i++) xb[i] = *(const LT_LT *)(pb + (i0 + i) * sb);
      LT_LOT *ob = so == to ? o + i0 : xo;
#pragma GCC ivdep
      for (int64_t i = 0; i < m; i++) ob[i] = f(xa[i], xb[i], p);
      if (so != to)
        for (int64_t i = 0; i < m; i++) *(LT_LOT *)(po + (i0 + i) * so) = xo[i];
    }
  }
}

#undef LT_LT
#undef LT_LOT
#undef LT_LNAME
#undef LT_LP
