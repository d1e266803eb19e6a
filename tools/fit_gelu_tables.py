#!/usr/bin/python3
"""Fits the tables of src/cpu/gelu.c: on each of the four intervals [k, k + 1), k = 0..3, a
degree-9 polynomial in u = a - b_k for P(a) = Phi(-a) (so that gelu(x) is max(x, 0) - |x| P(|x|),
one multiply-add) and for G'(a) = Phi(-a) - a phi(a) (gelu'(x) is G'(|x|) below 0, 1 - G'(x)
above), Phi and phi the standard normal's distribution and density. P is weighted for relative
error; G', which crosses zero near a = 0.75 where only an absolute error means anything, for
error relative to max(|G'|, 0.02); both reweighted toward minimax. The anchors b_k are 0, 2,
3, 4: the right end of every interval but the first, so that u <= 0 and, the derivatives
alternating in sign there, the leading terms c_j u^j have one sign and the float32 sum does not
cancel (centred anchors lost 10 ulp on [3, 4)); the first interval keeps u = a exact and a
constant term of exactly 1/2 (a degree-8 fit of (P(a) - 1/2) / a above it), so that tiny
inputs give x/2 in one rounding. The reference is mpmath at 40 digits. Prints the two C tables
([coefficient][lane]: the four intervals twice, one copy per 128-bit half for vpermilps) and
the error of the kernel's own evaluation (poly32 below, multiply-adds rounded once) over a
dense sweep: for gelu in float32 ulp, both signs, for G' as a fraction of the tolerance
spec/isa_spec.lua allows a gradient (1e-6 relative plus 1e-7).

With the argument avx512 it fits the tables of src/cpu/gelu_avx512.c instead: on each of 32
intervals [k/8, (k + 1)/8), anchored at its left end (u = a - k/8 >= 0), a degree-5
polynomial for P(a) = Phi(-a) (gelu(x) is max(x, 0) - a P(a), one multiply-add) and a degree-4
one for G'(a), both evaluated by Horner's rule in u; each table row holds one coefficient of
the 32 intervals, for vpermt2ps. It prints the error of gelu itself, both signs, in ulp.
The least-squares solutions depend in their last bits on the machine's LAPACK kernels, so a
coefficient may come out one float32 ulp away from the committed one on another CPU.
Run with Debian's python3-numpy and python3-mpmath:
/usr/bin/python3 tools/fit_gelu_tables.py [avx2|avx512]
"""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 40
DEG = 9
EDGES = [0.0, 1.0, 2.0, 3.0, 4.0]
ANCHORS = [0.0, 2.0, 3.0, 4.0]


def cdf_neg(a):
    return mp.erfc(mp.mpf(a) / mp.sqrt(2)) / 2


def dg(a):
    a = mp.mpf(a)
    return cdf_neg(a) - a * mp.exp(-a ** 2 / 2) / mp.sqrt(2 * mp.pi)


def fit(fn, lo, hi, anchor, deg, floor, n=300):
    """least squares in the error relative to max(|f|, floor), Lawson-reweighted toward
    minimax"""
    c, r = (lo + hi) / 2, (hi - lo) / 2
    a = c + r * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    f = np.array([float(fn(v)) for v in a])
    V = np.vander(a - anchor, deg + 1, increasing=True)
    w = 1 / np.maximum(np.abs(f), floor)
    coef, *_ = np.linalg.lstsq(V * w[:, None], f * w, rcond=None)
    w2 = w.copy()
    for _ in range(60):
        e = np.abs((V @ coef - f) * w)
        w2 = w2 * (e / e.max()) ** 0.3 + w * 1e-4
        w2 /= w2.max() / w.max()
        coef, *_ = np.linalg.lstsq(V * w2[:, None], f * w2, rcond=None)
    return coef


def f32(v):
    return np.asarray(v, dtype=np.float64).astype(np.float32)


def fma(a, b, c):   # float32 operands, one rounding (the float64 product is exact)
    return f32(a.astype(np.float64) * b.astype(np.float64) + np.asarray(c, dtype=np.float64))


def poly32(c, u):
    """src/cpu/gelu.c's evaluation: c0 + u (c1 + c2 u) + u^3 H(u), the even and odd halves of H
    by Horner's rule in u^2, multiply-adds rounded once"""
    u2 = f32(u.astype(np.float64) ** 2)
    u3 = f32(u2.astype(np.float64) * u)
    low = fma(u, fma(u, np.full_like(u, c[2]), c[1]), c[0])
    he, ho = np.full_like(u, c[9]), np.full_like(u, c[8])
    for j in (7, 5, 3):
        he = fma(he, u2, c[j])
    for j in (6, 4):
        ho = fma(ho, u2, c[j])
    return fma(u3, fma(ho, u, he), low)


def q0(a):
    """(Phi(-a) - 1/2) / a, whose fit makes the first interval's P(u) = 1/2 + u Q(u)"""
    a = mp.mpf(a)
    if a == 0:
        return -1 / mp.sqrt(2 * mp.pi)
    return (cdf_neg(a) - mp.mpf(1) / 2) / a


def coefficients(name, k):
    lo, hi, anchor = EDGES[k], EDGES[k + 1], ANCHORS[k]
    if name == "p_tab" and k == 0:   # 1/2 exactly, then the fit of Q shifted up one power
        return [0.5] + list(fit(q0, lo, hi, anchor, DEG - 1, 0.0))
    if name == "p_tab":
        return fit(cdf_neg, lo, hi, anchor, DEG, 0.0)
    return fit(dg, lo, hi, anchor, DEG, 0.02)



def horner32(c, u):
    """src/cpu/gelu_avx512.c's evaluation: Horner's rule in u, multiply-adds rounded once"""
    r = np.full_like(u, c[-1])
    for cj in reversed(c[:-1]):
        r = fma(r, u, cj)
    return r


def print_table(name, rows, lanes, per_line=4):
    print("static const float %s[%d][%d] __attribute__((aligned(%d))) = {"
          % (name, len(rows), lanes, min(lanes * 4, 64)))
    for vals in rows:
        text = ["%.9ef" % v for v in vals]
        lines = [", ".join(text[i:i + per_line]) for i in range(0, lanes, per_line)]
        print("    {%s}," % ",\n     ".join(lines))
    print("};")


def main_avx2():
    for name, fn in (("p_tab", cdf_neg), ("dg_tab", dg)):
        coefs, worst = [], 0.0
        for k in range(4):
            c32 = [np.float32(v) for v in coefficients(name, k)]
            coefs.append(c32)
            lo, hi, anchor = EDGES[k], EDGES[k + 1], ANCHORS[k]
            a = f32(np.linspace(lo, hi, 20001, endpoint=False))[1::3]
            p = poly32(c32, f32(a - np.float32(anchor))).astype(np.float64)   # a - b_k: exact
            if name == "p_tab":   # gelu itself, both signs: max(x, 0) - a P in one rounding
                for x in (a, -a):
                    y = f32(np.maximum(x, 0).astype(np.float64) - a.astype(np.float64) * p)
                    ex = np.array([float(mp.mpf(float(v)) * mp.ncdf(float(v))) for v in x])
                    err = np.abs(y - ex) / np.spacing(np.abs(f32(ex))).astype(np.float64)
                    worst = max(worst, float(err.max()))
            else:
                ex = np.array([float(fn(float(v))) for v in a])
                err = np.abs(p - ex) / (np.abs(ex) * 1e-6 + 1e-7)
                worst = max(worst, float(err.max()))
        unit = "ulp of gelu in float32, both signs" if name == "p_tab" else \
            "of the gradient tolerance"
        print("/* %s: worst %.2f %s */" % (name, worst, unit))
        print("static const float %s[%d][8] __attribute__((aligned(32))) = {" % (name, DEG + 1))
        for j in range(DEG + 1):
            vals = ", ".join("%.9ef" % coefs[k][j] for k in range(4))
            print("    {%s,\n     %s}," % (vals, vals))
        print("};")


def main_avx512():
    nint, deg_p, deg_dg = 32, 5, 4
    edges = [k / 8 for k in range(nint + 1)]
    anchors = edges[:-1]   # left ends: 1/8 is too short for the sum to cancel much
    p_rows = [[0.0] * nint for _ in range(deg_p + 1)]
    dg_rows = [[0.0] * nint for _ in range(deg_dg + 1)]
    worst_y, worst_d = 0.0, 0.0
    for k in range(nint):
        lo, hi, anchor = edges[k], edges[k + 1], anchors[k]
        cp = [np.float32(v) for v in fit(cdf_neg, lo, hi, anchor, deg_p, 0.0)]
        cd = [np.float32(v) for v in fit(dg, lo, hi, anchor, deg_dg, 0.02)]
        for j, v in enumerate(cp):
            p_rows[j][k] = v
        for j, v in enumerate(cd):
            dg_rows[j][k] = v
        a = f32(np.linspace(lo, hi, 2401, endpoint=False))[1::3]
        u = f32(a - np.float32(anchor))   # exact
        p = horner32(cp, u).astype(np.float64)
        for x in (a, -a):
            # max(x, 0) - a p in one rounding (a p is exact in float64)
            y = f32(np.maximum(x, 0).astype(np.float64) - a.astype(np.float64) * p)
            ex = np.array([float(mp.mpf(float(v)) * mp.ncdf(float(v))) for v in x])
            err = np.abs(y - ex) / np.spacing(np.abs(f32(ex))).astype(np.float64)
            worst_y = max(worst_y, float(err.max()))
        d = horner32(cd, u).astype(np.float64)
        ex = np.array([float(dg(float(v))) for v in a])
        worst_d = max(worst_d, float((np.abs(d - ex) / (np.abs(ex) * 1e-6 + 1e-7)).max()))
    print("/* gelu: worst %.2f ulp in float32 over the script's sweep, both signs */" % worst_y)
    print_table("p_tab", p_rows, nint)
    print("/* G': worst %.2f of the gradient tolerance */" % worst_d)
    print_table("dg_tab", dg_rows, nint)


LEVEL = sys.argv[1] if len(sys.argv) > 1 else "avx2"
if LEVEL == "avx2":
    main_avx2()
elif LEVEL == "avx512":
    main_avx512()
else:
    sys.exit("usage: fit_gelu_tables.py [avx2|avx512]")
