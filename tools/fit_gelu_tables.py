#!/usr/bin/python3
"""Fits the tables of src/cpu/gelu.c: on each of the four intervals [k, k + 1), k = 0..3, a
degree-9 polynomial in u = a - b_k for Phi(-a) (the standard normal's lower tail) and for phi(a)
(its density), weighted for relative error and reweighted toward minimax. The anchors b_k are
0, 2, 3, 4: the right end of every interval but the first, so that u <= 0 and, the derivatives
of both functions alternating in sign there, the leading terms c_j u^j have one sign and the
float32 sum does not cancel (centred anchors lose 10 ulp on [3, 4), where Phi(-a) falls 42-fold); the
first interval, where the value changes only 3-fold, keeps u = a exact. The reference is mpmath
at 40 digits. Prints the two C tables ([coefficient][lane]: the four intervals twice, one copy
per 128-bit half for vpermilps) and, for each, the worst error in float32 ulp of the kernel's
own evaluation (even and odd halves by Horner's rule in u^2, multiply-adds rounded
once) over a dense sweep.
Run with Debian's python3-numpy and python3-mpmath: /usr/bin/python3 tools/fit_gelu_tables.py
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
DEG = 9
EDGES = [0.0, 1.0, 2.0, 3.0, 4.0]
ANCHORS = [0.0, 2.0, 3.0, 4.0]


def cdf_neg(a):
    return mp.erfc(mp.mpf(a) / mp.sqrt(2)) / 2


def pdf(a):
    return mp.exp(-mp.mpf(a) ** 2 / 2) / mp.sqrt(2 * mp.pi)


def fit(fn, lo, hi, anchor, n=300):
    c, r = (lo + hi) / 2, (hi - lo) / 2
    a = c + r * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    f = np.array([float(fn(v)) for v in a])
    V = np.vander(a - anchor, DEG + 1, increasing=True)
    w = 1 / f
    coef, *_ = np.linalg.lstsq(V * w[:, None], f * w, rcond=None)
    w2 = w.copy()
    for _ in range(60):   # Lawson-style reweighting toward equal relative error
        e = np.abs((V @ coef - f) / f)
        w2 = w2 * (e / e.max()) ** 0.3 + w * 1e-4
        w2 /= w2.max() / w.max()
        coef, *_ = np.linalg.lstsq(V * w2[:, None], f * w2, rcond=None)
    return coef


def f32(v):
    return np.asarray(v, dtype=np.float64).astype(np.float32)


def fma(a, b, c):   # float32 operands, one rounding (the float64 product is exact)
    return f32(a.astype(np.float64) * b.astype(np.float64) + np.asarray(c, dtype=np.float64))


def evenodd32(c, u):
    """src/cpu/gelu.c's evaluation: the even and the odd coefficients by Horner's rule in u^2,
    then even + u odd"""
    u2 = f32(u.astype(np.float64) ** 2)
    pe = np.full_like(u, c[8])
    po = np.full_like(u, c[9])
    for j in (6, 4, 2, 0):
        pe = fma(pe, u2, c[j])
        po = fma(po, u2, c[j + 1])
    return fma(po, u, pe)


for name, fn in (("cdf_tab", cdf_neg), ("pdf_tab", pdf)):
    coefs, worst = [], 0.0
    for k in range(4):
        lo, hi, anchor = EDGES[k], EDGES[k + 1], ANCHORS[k]
        c32 = [np.float32(v) for v in fit(fn, lo, hi, anchor)]
        coefs.append(c32)
        a = f32(np.linspace(lo, hi, 20001, endpoint=False))[::3]
        p = evenodd32(c32, f32(a - np.float32(anchor)))   # exact: a and the anchor are close
        ex = np.array([float(fn(float(v))) for v in a])
        ulp = np.abs(p.astype(np.float64) - ex) / np.spacing(f32(ex)).astype(np.float64)
        worst = max(worst, float(ulp.max()))
    print("/* %s: worst %.2f ulp in float32 */" % (name, worst))
    print("static const float %s[%d][8] __attribute__((aligned(32))) = {" % (name, DEG + 1))
    for j in range(DEG + 1):
        vals = ", ".join("%.9ef" % coefs[k][j] for k in range(4))
        print("    {%s,\n     %s}," % (vals, vals))
    print("};")
