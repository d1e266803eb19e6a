/*
** cpu/addc_float.h -- template: the addcmul, addcdiv and lerp rows of one float type. Included
** by addc.c with LT_T (float or double).
*/
#define TF(n) LT_EW_PASTE(n##_, LT_T)

/* operands: out, s, a, b (b absent for LT_LERP_SCALAR); strides in bytes */
LT_EW_INLINE void TF(addc_body)(const addc_job *j, char **d, const int64_t *st, int64_t n) {
  const int64_t es = (int64_t)sizeof(LT_T);
  LT_T *o = (LT_T *)d[0];
  const LT_T *s = (const LT_T *)d[1], *a = (const LT_T *)d[2];
  const LT_T *b = j->op == LT_LERP_SCALAR ? NULL : (const LT_T *)d[3];
  const LT_T p = (LT_T)j->p, q = (LT_T)(1 - j->p);
  bool dense = st[0] == es && st[1] == es && st[2] == es && (!b || st[3] == es);
  if (!dense) {
    /* broadcast or strided operands: element by element, through the same formulas */
    for (int64_t i = 0; i < n; i++) {
      LT_T sv = *(const LT_T *)(d[1] + i * st[1]), av = *(const LT_T *)(d[2] + i * st[2]);
      LT_T bv = b ? *(const LT_T *)(d[3] + i * st[3]) : 0, r;
      switch (j->op) {
        case LT_ADDC_MUL: r = sv + p * av * bv; break;
        case LT_ADDC_DIV: r = sv + p * av / bv; break;
        case LT_LERP_SCALAR: r = j->near ? sv + (av - sv) * p : av - (av - sv) * q; break;
        default: {
          LT_T dv = av - sv, lo = sv + bv * dv, hi = av - dv * (1 - bv);
          r = (bv < 0 ? -bv : bv) < (LT_T)0.5 ? lo : hi;
        }
      }
      *(LT_T *)(d[0] + i * st[0]) = r;
    }
    return;
  }
  switch (j->op) {
    case LT_ADDC_MUL:
#pragma GCC ivdep
      for (int64_t i = 0; i < n; i++) o[i] = s[i] + p * a[i] * b[i];
      break;
    case LT_ADDC_DIV:
#pragma GCC ivdep
      for (int64_t i = 0; i < n; i++) o[i] = s[i] + p * a[i] / b[i];
      break;
    case LT_LERP_SCALAR:
      if (j->near) {
#pragma GCC ivdep
        for (int64_t i = 0; i < n; i++) o[i] = s[i] + (a[i] - s[i]) * p;
      } else {
#pragma GCC ivdep
        for (int64_t i = 0; i < n; i++) o[i] = a[i] - (a[i] - s[i]) * q;
      }
      break;
    default:
#pragma GCC ivdep
      for (int64_t i = 0; i < n; i++) {
        LT_T dv = a[i] - s[i], lo = s[i] + b[i] * dv, hi = a[i] - dv * (1 - b[i]);
        o[i] = (b[i] < 0 ? -b[i] : b[i]) < (LT_T)0.5 ? lo : hi;
      }
  }
}

#undef TF
