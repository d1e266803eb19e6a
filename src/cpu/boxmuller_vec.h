/*
** cpu/boxmuller_vec.h -- template: the Box-Muller block of boxmuller.c on vectors of W pairs,
** the scalar code's operations in the same order, so each lane gives its bits. Included by
** boxmuller.c at each vector level after defining BM_FN (the function's name), W, the types
** VD (W doubles), VI (W int64) and VM (a comparison's result) and the V* operations; it
** undefines them all.
*/
static void BM_FN(double *z, int64_t pairs) {
  int64_t i = 0;
  for (; i + W <= pairs; i += W) {
    VD a, b;
    DEINTERLEAVE(z + 2 * i, a, b);
    /* bm_log(a) */
    VI ab = VCASTI(a);
    VD ef = VSUB(VCASTD(VOR(VSRL(ab, 52), VSET1I(0x4330000000000000LL))),
                 VSET1(0x1p52 + 1022.0));
    VD m = VCASTD(VOR(VAND(ab, VSET1I(0x000fffffffffffffLL)), VSET1I(0x3fe0000000000000LL)));
    VD low = VBLEND(VSET1(0.0), VSET1(1.0), VLT(m, VSET1(0.70710678118654752440)));
    m = VADD(m, VMUL(m, low));
    ef = VSUB(ef, low);
    VD f = VSUB(m, VSET1(1.0)), s = VDIV(f, VADD(VSET1(2.0), f)), s2 = VMUL(s, s);
    VD R = VSET1(bm_log_c[0]);
    for (int q = 1; q < 11; q++) R = VADD(VMUL(R, s2), VSET1(bm_log_c[q]));
    R = VMUL(R, s2);
    VD lg = VADD(VMUL(ef, VSET1(6.93147180369123816490e-01)),
                 VADD(VSUB(f, VMUL(s, VSUB(f, R))),
                      VMUL(ef, VSET1(1.90821492927058770002e-10))));
    VD r = VSQRT(VMUL(VSET1(-2.0), lg));
    /* bm_sincos2pi(b) */
    VD k = VSUB(VADD(VMUL(VSET1(4.0), b), VSET1(0x1p52)), VSET1(0x1p52));
    VD x = VMUL(VSUB(b, VMUL(VSET1(0.25), k)), VSET1(6.28318530717958647693));
    VD x2 = VMUL(x, x);
    VD S = VSET1(bm_sin_c[0]);
    for (int q = 1; q < 9; q++) S = VADD(VMUL(S, x2), VSET1(bm_sin_c[q]));
    VD sx = VADD(x, VMUL(x, VMUL(x2, S)));
    VD Cp = VSET1(bm_cos_c[0]);
    for (int q = 1; q < 8; q++) Cp = VADD(VMUL(Cp, x2), VSET1(bm_cos_c[q]));
    VD cx = VSUB(VSET1(1.0), VADD(VMUL(VSET1(0.5), x2), VMUL(VMUL(x2, x2), Cp)));
    VD h = VTRUNC(VMUL(VSET1(0.5), k));
    VD odd = VSUB(k, VMUL(VSET1(2.0), h));
    VD two = VSUB(h, VMUL(VSET1(2.0), VTRUNC(VMUL(VSET1(0.5), h))));
    VM sw = VGT(odd, VSET1(0.5));
    VD s0 = VBLEND(sx, cx, sw), c0 = VBLEND(cx, sx, sw);
    VD sn = VMUL(s0, VSUB(VSET1(1.0), VMUL(VSET1(2.0), two)));
    VD cs = VMUL(c0, VSUB(VSET1(1.0), VMUL(VSET1(2.0), VABS(VSUB(odd, two)))));
    INTERLEAVE(z + 2 * i, VMUL(r, cs), VMUL(r, sn));
  }
  normal_block_sse4(z + 2 * i, pairs - i);
}

#undef BM_FN
#undef W
#undef VD
#undef VI
#undef VM
#undef VCASTI
#undef VCASTD
#undef VOR
#undef VAND
#undef VSRL
#undef VSET1I
#undef VSET1
#undef VADD
#undef VSUB
#undef VMUL
#undef VDIV
#undef VSQRT
#undef VTRUNC
#undef VABS
#undef VLT
#undef VGT
#undef VBLEND
#undef DEINTERLEAVE
#undef INTERLEAVE
