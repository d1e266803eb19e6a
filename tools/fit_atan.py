#!/usr/bin/python3
"""Fits the polynomial of src/cpu/vmath.h's vm_atan_core: atan(u) = u + u^3 P(u^2) for
|u| <= tan(pi/8), where the reduction leaves u, with P of degree 5 in v = u^2, evaluated in
float64. The fit weights the error relative to atan(u), on Chebyshev nodes in v, reweighted
toward minimax; the reference is mpmath at 40 digits. Prints the coefficients, highest first
(Horner order), and the largest relative error of the float64 evaluation over a dense sweep
(it needs to be far below a float32 ulp, 6e-8, for the float32 result to round once).
Run with Debian's python3-numpy and python3-mpmath: /usr/bin/python3 tools/fit_atan.py
"""
import mpmath
import numpy as np

mpmath.mp.dps = 40
DEG = 5
V_MAX = float(mpmath.tan(mpmath.pi / 8)) ** 2


def target(v):   # P(v) = (atan(u) - u) / u^3, u = sqrt(v); its limit at 0 is -1/3
    if v == 0:
        return mpmath.mpf(-1) / 3
    u = mpmath.sqrt(v)
    return (mpmath.atan(u) - u) / u ** 3


def main():
    n = 400
    nodes = [V_MAX * (1 - np.cos(np.pi * (k + 0.5) / n)) / 2 for k in range(n)]
    vs = np.array(nodes)
    ys = np.array([float(target(mpmath.mpf(v))) for v in nodes])
    # the error of atan is u^3 dP, relative to atan(u) ~ u: weight by u^2 = v (and keep v = 0)
    w = np.maximum(vs, 1e-6)
    for _ in range(6):
        a = np.vander(vs, DEG + 1, increasing=True) * w[:, None]
        c, *_ = np.linalg.lstsq(a, ys * w, rcond=None)
        err = np.abs(np.polyval(c[::-1], vs) - ys) * w
        w = w * (1 + 4 * err / err.max())
    print("coefficients, highest first:")
    for x in c[::-1]:
        print("  %.17g" % x)
    worst = 0.0
    for u in np.linspace(1e-4, np.sqrt(V_MAX), 200001):
        v = u * u
        p = 0.0
        for x in c[::-1]:
            p = p * v + x
        got = u + u * v * p
        ref = mpmath.atan(mpmath.mpf(u))
        worst = max(worst, float(abs((got - ref) / ref)))
    print("largest relative error of the float64 evaluation: %.3g" % worst)


main()
