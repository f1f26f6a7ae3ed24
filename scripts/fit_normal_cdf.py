#!/usr/bin/env python3
"""Derives the two polynomials of float32 GELU's normal CDF (core/ops/normal_cdf.h) and prints
them as the header writes them. Both are fitted for the smallest largest *relative* error
(Lawson's iteratively reweighted least squares on Chebyshev nodes, against 40-digit mpmath):

  centre, 0 <= a = |x| <= 0.76 sqrt 2:  Phi(-a) = 0.5 - a R(a^2),   R degree 5
  tail,   0.74 <= z = a / sqrt 2 <= 10.5: erfc(z) = t exp(-z^2) Q(t), t = 1 / (1 + z / sqrt 2), Q degree 8

(The header switches at a = 1.06, z = 0.7495, inside both ranges; 0.5 erfc(10.5) is below the
smallest float.) Prints each fit's largest relative error in exact arithmetic: 1.7e-9 and 1.3e-8.

  /usr/bin/python3 scripts/fit_normal_cdf.py        (needs python3-numpy and python3-mpmath)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40


def chebyshev_nodes(lo, hi, n=1500):
    u = 0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    return np.concatenate([[lo], lo + (hi - lo) * u, [hi]])


def fit_relative(xs, ys, degree, iterations=200):
    """Coefficients (lowest first) of the polynomial of `degree` closest to ys in relative terms."""
    vander = np.vander(xs, degree + 1, increasing=True)
    weights = np.ones_like(xs) / len(xs)
    best = (None, np.inf)
    for _ in range(iterations):
        rows = vander / ys[:, None] * np.sqrt(weights)[:, None]
        coef, *_ = np.linalg.lstsq(rows, np.sqrt(weights), rcond=None)
        err = np.abs(vander @ coef / ys - 1)
        if err.max() < best[1]:
            best = (coef, err.max())
        weights = weights * (err / err.max() + 1e-3)  # Lawson: weight grows where the error is largest
        weights /= weights.sum()
    return best


def centre():
    us = chebyshev_nodes(0.0, (0.76 * float(mp.sqrt(2))) ** 2)
    ys = np.array([float(mp.erf(mp.sqrt(u / 2)) / (2 * mp.sqrt(u))) if u > 0 else float(1 / mp.sqrt(2 * mp.pi))
                   for u in us])
    return fit_relative(us, ys, 5)


def tail():
    p = mp.sqrt(2) / 2
    ts = chebyshev_nodes(float(1 / (1 + p * 10.5)), float(1 / (1 + p * 0.74)))

    def q(t):
        z = (1 / mp.mpf(t) - 1) / p
        return mp.erfc(z) * mp.exp(z * z) / t

    return fit_relative(ts, np.array([float(q(t)) for t in ts]), 8)


for name, (coef, err) in (("R (centre)", centre()), ("Q (tail)", tail())):
    print(f"{name}: largest relative error {err:.2g}; highest degree first:")
    for c in coef[::-1]:
        print(f"  {c:.9e}f")
