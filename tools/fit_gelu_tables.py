#!/usr/bin/python3
"""Fits the tables of src/cpu/gelu.c: on each interval [k/2, k/2 + 1/2), k = 0..7, a degree-7
polynomial in u = a - (k/2 + 1/4) for Phi(-a) (the standard normal's lower tail) and for phi(a)
(its density), weighted for relative error and reweighted toward minimax. The reference is
mpmath at 40 digits. Prints the two C tables ([coefficient][interval]) and, for each, the worst
error in float32 ulp of a float32 Horner evaluation (multiply-adds rounded once) over a dense
sweep. Run with Debian's python3-numpy and python3-mpmath: /usr/bin/python3 tools/fit_gelu_tables.py
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
DEG, WIDTH, N = 7, 0.5, 8


def cdf_neg(a):
    return mp.erfc(mp.mpf(a) / mp.sqrt(2)) / 2


def pdf(a):
    return mp.exp(-mp.mpf(a) ** 2 / 2) / mp.sqrt(2 * mp.pi)


def fit(fn, lo, hi, n=300):
    c, r = (lo + hi) / 2, (hi - lo) / 2
    a = c + r * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    f = np.array([float(fn(v)) for v in a])
    V = np.vander(a - c, DEG + 1, increasing=True)
    w = 1 / f
    coef, *_ = np.linalg.lstsq(V * w[:, None], f * w, rcond=None)
    w2 = w.copy()
    for _ in range(40):   # Lawson-style reweighting toward equal relative error
        e = np.abs((V @ coef - f) / f)
        w2 = w2 * (e / e.max()) ** 0.3 + w * 1e-3
        w2 /= w2.max() / w.max()
        coef, *_ = np.linalg.lstsq(V * w2[:, None], f * w2, rcond=None)
    return coef


def horner32(coef, u):
    p = np.float32(coef[-1])
    for c in coef[-2::-1]:
        p = np.float32(np.float64(p) * np.float64(u) + np.float64(np.float32(c)))
    return p


for name, fn in (("cdf_tab", cdf_neg), ("pdf_tab", pdf)):
    coefs = [fit(fn, k * WIDTH, (k + 1) * WIDTH) for k in range(N)]
    worst = 0.0
    for k in range(N):
        c32 = [np.float32(v) for v in coefs[k]]
        centre = np.float32(k * WIDTH + WIDTH / 2)
        for a in np.float32(np.linspace(k * WIDTH, (k + 1) * WIDTH, 4001, endpoint=False))[::7]:
            ex = float(fn(float(a)))
            p = horner32(c32, np.float32(a - centre))
            worst = max(worst, abs(float(p) - ex) / float(np.spacing(np.float32(ex))))
    print("/* %s: worst %.2f ulp in float32 */" % (name, worst))
    print("static const float %s[8][8] __attribute__((aligned(32))) = {" % name)
    for j in range(DEG + 1):
        vals = ["%.9ef" % np.float32(coefs[k][j]) for k in range(N)]
        print("    {%s,\n     %s}," % (", ".join(vals[:4]), ", ".join(vals[4:])))
    print("};")
