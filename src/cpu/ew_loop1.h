/*
** cpu/ew_loop1.h -- template: the row loop of a unary formula, o = f(x, params). Included
** with LT_LT (input type), LT_LOT (output type), LT_LNAME (the function's name) and LT_LP (the
** parameter struct); undefines them.
*/
typedef LT_LOT (*LT_EW_PASTE(LT_LNAME, _fn))(LT_LT x, const LT_LP *p);

LT_EW_INLINE void LT_LNAME(char **d, int64_t so, int64_t sa, int64_t n, const LT_LP *p,
                           LT_EW_PASTE(LT_LNAME, _fn) f) {
  if (so == (int64_t)sizeof(LT_LOT) && sa == (int64_t)sizeof(LT_LT)) {
    LT_LOT *o = (LT_LOT *)d[0];
    const LT_LT *a = (const LT_LT *)d[1];
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) o[i] = f(a[i], p);
  } else {   /* strided: through blocks on the stack, so that f runs as the loop above does */
    LT_LT xa[LT_EW_GATHER];
    LT_LOT xo[LT_EW_GATHER];
    char *o = d[0];
    const char *a = d[1];
    for (int64_t i0 = 0; i0 < n; i0 += LT_EW_GATHER) {
      int64_t m = n - i0 < LT_EW_GATHER ? n - i0 : LT_EW_GATHER;
      for (int64_t i = 0; i < m; i++) xa[i] = *(const LT_LT *)(a + (i0 + i) * sa);
      LT_LOT *ob = so == (int64_t)sizeof(LT_LOT) ? (LT_LOT *)o + i0 : xo;
#pragma GCC ivdep
      for (int64_t i = 0; i < m; i++) ob[i] = f(xa[i], p);
      if (ob == xo)
        for (int64_t i = 0; i < m; i++) *(LT_LOT *)(o + (i0 + i) * so) = xo[i];
    }
  }
}

#undef LT_LT
#undef LT_LOT
#undef LT_LNAME
#undef LT_LP
