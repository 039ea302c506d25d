"""numba kernels of budgeted SGD (Wang, Crammer & Vucetic, 2012): the per-example step and
the three budget maintenance strategies (removal, projection, merging).

Nothing here imports dask; :mod:`dkernel.svm._fit` decides what runs where. Every
function trusts its input (validated by the estimator).

Model state (:class:`BSGDState`, made by :func:`new_state`): support vectors ``SV`` (B+1, d)
float64 with their squared norms ``sqn`` and a transposed copy ``SVT`` (d, B+1) that the
scores read (:func:`~dkernel.kernels.krow_into`: all SVs' k-th feature at once, so the
kernel row vectorises; every write goes through :func:`_put_sv` or :func:`set_support`),
coefficients ``A`` (B+1, c) stored *unscaled* (the
true coefficients are ``s * A`` with the global scale ``s = fs[0]``, so the shrink
``w <- (1 - eta alpha) w`` is O(1) per step), the kernel matrix of the SVs ``K`` (B+1, B+1),
the inverse ``M`` of ``K + ridge I`` (projection only), the bias ``b`` (c,) of the augmented
constant feature (also scaled by ``s``), float scalars
``fs = [s, ||w||^2, sum ||Delta||, sum ||Delta||^2, S, W]`` and integer scalars
``ist = [t, n_sv, n_maint, since_refresh, n_violations]`` (margin violations seen, for
progress reports). Its conversions (model files, checkpoints) and the rule choosing the
model it stands for are in :mod:`dkernel.svm.state`.

Averaged iterates (Polyak/ASGD averaging of the kernel expansion, on when ``avg_mode > 0``):
``Abar`` (B+1, c) and ``bbar`` (c,) hold ``sum_t omega_t w_t`` in true units over the steps
``t >= avg_start`` (``omega_t = 1``, or ``t - avg_start + 1`` for the linearly weighted
average of Lacoste-Julien, Schmidt & Bach 2012), ``W = fs[5] = sum_t omega_t``; the averaged
model is ``Abar / W``. The sum is kept lazily: ``S = fs[4] = sum_t omega_t s_t`` and
``sref[j]`` is S when SV j's unscaled coefficient last changed, so SV j owes
``A[j] (S - sref[j])`` (:func:`flush_average`); O(1) per step. Budget maintenance applies
the same edit (the same merge weights, the same projection) to ``Abar``.

The binary problem uses one column (labels -1/+1, hinge ``y f(x) < 1``); ``c >= 2`` columns
use the Crammer-Singer multi-class hinge ``f_y - max_{r != y} f_r < 1``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels import krow_into, kval, sq_norm, sq_norms

# learning-rate families
PEGASOS, NORMA, PERCEPTRON = 0, 1, 2
ALGORITHM_CODES = {"pegasos": PEGASOS, "norma": NORMA, "perceptron": PERCEPTRON}
# maintenance strategies
REMOVE, PROJECT, MERGE = 0, 1, 2
MAINTENANCE_CODES = {"remove": REMOVE, "project": PROJECT, "merge": MERGE}
# merge searches: golden section for every partner, a lookup table to screen partners, or
# golden section for the NEAR_PARTNERS partners of largest kernel value only (the merge tree)
GOLDEN, LOOKUP, NEAR = 0, 1, 2
#: Partners screened by the NEAR search (those with the largest k(x_m, x_n)).
NEAR_PARTNERS = 32

#: Ridge added to the SV kernel matrix for projection: (K + ridge I)^-1.
PROJECT_RIDGE = 1e-6
#: Rescale A by s when the global scale falls below this (avoids underflow).
_MIN_SCALE = 1e-6
#: Iterations of the golden-section screen over all partners and of the final refinement.
_GOLD_SCREEN = 10
_GOLD_REFINE = 48
_INVPHI = 0.6180339887498949

# averaging modes
AVG_OFF, AVG_UNIFORM, AVG_LINEAR = 0, 1, 2

# indices into the scalar state arrays
FS_SCALE, FS_WNORM2, FS_DEGR, FS_DEGR2, FS_SACC, FS_WSUM = 0, 1, 2, 3, 4, 5
IS_T, IS_NSV, IS_NMAINT, IS_SINCE, IS_VIOL = 0, 1, 2, 3, 4


class BSGDState(NamedTuple):
    """The learner's arrays (see the module docstring); the numba functions take it whole
    and update it in place."""

    SV: np.ndarray
    sqn: np.ndarray
    A: np.ndarray
    K: np.ndarray
    M: np.ndarray
    b: np.ndarray
    fs: np.ndarray
    ist: np.ndarray
    Abar: np.ndarray
    bbar: np.ndarray
    sref: np.ndarray
    SVT: np.ndarray

    @property
    def n_sv(self) -> int:
        return int(self.ist[IS_NSV])

    def copy(self) -> BSGDState:
        return BSGDState(*(a.copy() for a in self))


class BSGDConfig(NamedTuple):
    """Settings of the numba loop (:func:`sgd_chunk`, :func:`maintain`): the kernel (its code
    in :data:`dkernel.kernels.KERNEL_CODES` and parameters), the learning-rate family and
    its ``alpha``/``eta0``, the radius (0: none), the maintenance and its ridge, merge
    exponent ``pw``, search and lookup table ``T``, the budget, the intercept feature's
    value ``icpt`` and the averaging mode and first averaged step."""

    kind: int
    gamma: float
    degree: float
    coef0: float
    algo: int
    alpha: float
    eta0: float
    radius: float
    maint: int
    icpt: float
    ridge: float
    pw: int
    search: int
    T: np.ndarray
    budget: int
    avg_mode: int
    avg_start: int


def fresh_counters() -> tuple[np.ndarray, np.ndarray]:
    """The float and integer counters ``(fs, ist)`` of a fresh state: scale 1, the rest 0."""
    fs = np.zeros(6)
    fs[FS_SCALE] = 1.0
    return fs, np.zeros(5, dtype=np.int64)


def new_state(budget: int, n_features: int, n_cols: int, maintenance: int) -> BSGDState:
    """Fresh, empty model state with room for ``budget + 1`` SVs (see the module docstring)."""
    B1 = budget + 1
    fs, ist = fresh_counters()
    return BSGDState(
        SV=np.zeros((B1, n_features)),
        sqn=np.zeros(B1),
        A=np.zeros((B1, n_cols)),
        K=np.zeros((B1, B1)),
        M=np.zeros((B1, B1)) if maintenance == PROJECT else np.zeros((1, 1)),
        b=np.zeros(n_cols),
        fs=fs,
        ist=ist,
        Abar=np.zeros((B1, n_cols)),
        bbar=np.zeros(n_cols),
        sref=np.zeros(B1),
        SVT=np.zeros((n_features, B1)),
    )


def set_support(st: BSGDState, SV: np.ndarray) -> None:
    """The first ``len(SV)`` support vectors and their squared norms (and the columns of
    the scoring loop's transposed copy) from the rows of ``SV``."""
    m = len(SV)
    st.SV[:m] = SV
    st.SVT[:, :m] = SV.T
    st.sqn[:m] = sq_norms(st.SV[:m])


@njit(cache=True, nogil=True)
def _put_sv(st, j, x, xsq):
    """Slot ``j`` holds the point x (with its squared norm): the row of ``SV`` and the
    column of ``SVT``, the copy the scoring loop reads all points' k-th feature from."""
    st.SV[j, :] = x
    st.SVT[:, j] = x
    st.sqn[j] = xsq


# ----------------------------------------------------------------------------- merging
@njit(cache=True, nogil=True)
def _merge_weights(L, pw, h):
    """``(k^((1-h)^p), k^(h^p))`` with ``k^x = exp(x log k)``, ``L = log k`` (p = 2 for rbf,
    1 for laplacian): k(x_m, z) and k(x_n, z) for ``z = h x_m + (1 - h) x_n``."""
    u = 1.0 - h
    if pw == 2:
        return np.exp(u * u * L), np.exp(h * h * L)
    return np.exp(abs(u) * L), np.exp(abs(h) * L)


@njit(cache=True, nogil=True)
def _merge_obj(P, Q, R, L, pw, h):
    """F(h) = sum_i (a_m k^((1-h)^p) + a_n k^(h^p))^2 = P e1^2 + 2 Q e1 e2 + R e2^2."""
    e1, e2 = _merge_weights(L, pw, h)
    return P * e1 * e1 + 2.0 * Q * e1 * e2 + R * e2 * e2


@njit(cache=True, nogil=True)
def merge_h(P, Q, R, L, pw, iters):
    """Maximise F(h) on [0, 1]: a 5-point grid picks the bracket, golden section refines it.

    Returns (h, F(h)); the endpoints h = 0 and h = 1 are always candidates, so a merge
    never degrades the model more than removing the smaller of the two points.
    """
    best_j = 0
    best_f = -1.0
    for j in range(5):
        f = _merge_obj(P, Q, R, L, pw, 0.25 * j)
        if f > best_f:
            best_f = f
            best_j = j
    lo = max(0.0, 0.25 * (best_j - 1))
    hi = min(1.0, 0.25 * (best_j + 1))
    c = hi - _INVPHI * (hi - lo)
    d = lo + _INVPHI * (hi - lo)
    fc = _merge_obj(P, Q, R, L, pw, c)
    fd = _merge_obj(P, Q, R, L, pw, d)
    for _ in range(iters):
        if fc > fd:
            hi = d
            d = c
            fd = fc
            c = hi - _INVPHI * (hi - lo)
            fc = _merge_obj(P, Q, R, L, pw, c)
        else:
            lo = c
            c = d
            fc = fd
            d = lo + _INVPHI * (hi - lo)
            fd = _merge_obj(P, Q, R, L, pw, d)
    h = 0.5 * (lo + hi)
    fh = _merge_obj(P, Q, R, L, pw, h)
    if best_f > fh:
        return 0.25 * best_j, best_f
    return h, fh


_LOOKUP_CACHE: dict[int, np.ndarray] = {}


def lookup_table(pw: int) -> np.ndarray:
    """The merge lookup table for exponent ``pw`` (2: rbf, 1: laplacian), built once per
    process and cached."""
    if pw not in _LOOKUP_CACHE:
        _LOOKUP_CACHE[pw] = build_lookup(pw)
    return _LOOKUP_CACHE[pw]


#: Lookup table of the binary merge's argmax h over (m, k) (later budgeted-SVM work,
#: e.g. Glasmachers & Qaadan's precomputed merging): rows m in [0, 1], columns k in [0, 1].
LOOKUP_M = 201
LOOKUP_K = 201


@njit(cache=True, nogil=True)
def build_lookup(pw):
    """h*(m, k) on a (LOOKUP_M, LOOKUP_K) grid: argmax of m k^((1-h)^p) + (1-m) k^(h^p)."""
    T = np.empty((LOOKUP_M, LOOKUP_K))
    for i in range(LOOKUP_M):
        m = i / (LOOKUP_M - 1)
        for j in range(LOOKUP_K):
            k = max(j / (LOOKUP_K - 1), 1e-300)
            # F with a_m = m, a_n = 1 - m (same argmax as the linear objective when F > 0)
            h, _ = merge_h(m * m, m * (1.0 - m), (1.0 - m) * (1.0 - m), np.log(k), pw, _GOLD_REFINE)
            T[i, j] = h
    return T


@njit(cache=True, nogil=True)
def _lookup_h(T, m, k):
    x = m * (LOOKUP_M - 1)
    y = k * (LOOKUP_K - 1)
    i = min(int(x), LOOKUP_M - 2)
    j = min(int(y), LOOKUP_K - 2)
    fx = x - i
    fy = y - j
    return (
        (1 - fx) * (1 - fy) * T[i, j]
        + fx * (1 - fy) * T[i + 1, j]
        + (1 - fx) * fy * T[i, j + 1]
        + fx * fy * T[i + 1, j + 1]
    )


@njit(cache=True, nogil=True)
def merge_partner(A, K, n_sv, m, pw, search, T):
    """Best merge partner of SV ``m``: (n, h, degradation^2 in unscaled units).

    Every partner is screened (golden section with few iterations, or the lookup table for
    one-column models with same-sign coefficients; ``search == NEAR``: only the
    ``NEAR_PARTNERS`` partners nearest in feature space); the chosen one is refined to ~1e-9.
    Degradation ||a_m phi_m + a_n phi_n - a_z phi_z||^2 = P + R + 2 Q k - F(h) (closed form).
    """
    c = A.shape[1]
    best_n = -1
    best_d = np.inf
    P = 0.0
    for i in range(c):
        P += A[m, i] * A[m, i]
    near = search == NEAR and n_sv - 1 > NEAR_PARTNERS
    n_try = n_sv
    cand = np.empty(0, dtype=np.int64)
    if near:
        cand = _nearest(K, m, n_sv, NEAR_PARTNERS)
        n_try = NEAR_PARTNERS
    for jj in range(n_try):
        n = cand[jj] if near else jj
        if n == m:
            continue
        Q = 0.0
        R = 0.0
        for i in range(c):
            Q += A[m, i] * A[n, i]
            R += A[n, i] * A[n, i]
        k = K[m, n]
        if k <= 0.0:
            k = 1e-300
        L = np.log(k)
        base = P + R + 2.0 * Q * k
        if search == LOOKUP and c == 1:
            am = A[m, 0]
            an = A[n, 0]
            if am * an > 0.0:
                h = _lookup_h(T, am / (am + an), k)
                f = _merge_obj(P, Q, R, L, pw, h)
            else:
                f = _merge_obj(P, Q, R, L, pw, 0.0)
        else:
            h, f = merge_h(P, Q, R, L, pw, _GOLD_SCREEN)
        dg = base - f
        if dg < best_d:
            best_d = dg
            best_n = n
    Q = 0.0
    R = 0.0
    for i in range(c):
        Q += A[m, i] * A[best_n, i]
        R += A[best_n, i] * A[best_n, i]
    k = max(K[m, best_n], 1e-300)
    h, f = merge_h(P, Q, R, np.log(k), pw, _GOLD_REFINE)
    return best_n, h, max(P + R + 2.0 * Q * k - f, 0.0)


@njit(cache=True, nogil=True)
def _nearest(K, m, n_sv, k):
    """The k partners j != m of largest ``K[m, j]``, in index order (ties at the k-th value
    broken by index): a partition, O(B), where a sort was O(B log B)."""
    neg = -K[m, :n_sv]
    neg[m] = np.inf
    thr = np.partition(neg, k - 1)[k - 1]
    out = np.empty(k, dtype=np.int64)
    c = 0
    for j in range(n_sv):
        if neg[j] < thr:
            out[c] = j
            c += 1
    for j in range(n_sv):
        if c == k:
            break
        if neg[j] == thr:
            out[c] = j
            c += 1
    return out


# ----------------------------------------------------------------------------- state edits
@njit(cache=True, nogil=True)
def _smallest(A, K, n_sv):
    """Index of the SV with the smallest ||alpha_j||^2 k(x_j, x_j), and that value."""
    best = 0
    bv = np.inf
    for j in range(n_sv):
        a2 = 0.0
        for i in range(A.shape[1]):
            a2 += A[j, i] * A[j, i]
        v = a2 * K[j, j]
        if v < bv:
            bv = v
            best = j
    return best, bv


@njit(cache=True, nogil=True)
def _flush(j, A, Abar, sref, sacc):
    """Bring SV j's averaged sum up to date (see the module docstring)."""
    dS = sacc - sref[j]
    for i in range(A.shape[1]):
        Abar[j, i] += A[j, i] * dS
    sref[j] = sacc


@njit(cache=True, nogil=True)
def flush_average(A, Abar, sref, fs, n_sv):
    """Bring every SV's averaged sum up to date: afterwards ``Abar[:n_sv]`` is exact."""
    for j in range(n_sv):
        _flush(j, A, Abar, sref, fs[FS_SACC])


@njit(cache=True, nogil=True)
def _joint(A, Abar, sref, fs, n_sv):
    """``[s A, Abar / W]`` of the first n_sv SVs (after a flush): the iterate and the averaged
    model side by side, so that maintenance keeps both close."""
    flush_average(A, Abar, sref, fs, n_sv)
    c = A.shape[1]
    s = fs[FS_SCALE]
    iw = 1.0 / fs[FS_WSUM]
    C = np.empty((n_sv, 2 * c))
    for j in range(n_sv):
        for i in range(c):
            C[j, i] = s * A[j, i]
            C[j, c + i] = Abar[j, i] * iw
    return C


@njit(cache=True, nogil=True)
def _swap_remove(st, p, n_sv, has_M, avg):
    """Remove SV ``p`` by moving the last one into its slot. Returns the new count."""
    SV, A, K, M, Abar = st.SV, st.A, st.K, st.M, st.Abar
    last = n_sv - 1
    if p != last:
        _put_sv(st, p, SV[last], st.sqn[last])
        A[p, :] = A[last, :]
        if avg:
            Abar[p, :] = Abar[last, :]
            st.sref[p] = st.sref[last]
        for j in range(n_sv):
            K[p, j] = K[last, j]
        for j in range(n_sv):
            K[j, p] = K[j, last]
        K[p, p] = K[last, last]
        if has_M:
            for j in range(n_sv):
                M[p, j] = M[last, j]
            for j in range(n_sv):
                M[j, p] = M[j, last]
            M[p, p] = M[last, last]
    A[last, :] = 0.0
    if avg:
        Abar[last, :] = 0.0
    return last


@njit(cache=True, nogil=True)
def refresh_inverse(K, M, n_sv, ridge):
    """M <- (K + ridge I)^-1 from scratch (projection's periodic refresh)."""
    if n_sv == 0:
        return
    Kr = K[:n_sv, :n_sv].copy()
    for j in range(n_sv):
        Kr[j, j] += ridge
    M[:n_sv, :n_sv] = np.linalg.inv(Kr)


@njit(cache=True, nogil=True)
def _inverse_add(M, K, n, kxx, ridge):
    """Grow M = (K_n + rI)^-1 by the new row/column n of K (block inverse, O(n^2)).

    Returns False when the Schur complement is not safely positive (the caller refreshes).
    """
    v = np.zeros(n)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += M[i, j] * K[n, j]
        v[i] = s
    schur = kxx + ridge
    for i in range(n):
        schur -= K[n, i] * v[i]
    if not (schur > 0.5 * ridge):
        return False
    inv = 1.0 / schur
    for i in range(n):
        vi = v[i] * inv
        for j in range(n):
            M[i, j] += vi * v[j]
        M[i, n] = -vi
        M[n, i] = -vi
    M[n, n] = inv
    return True


# ----------------------------------------------------------------------------- maintenance
@njit(cache=True, nogil=True)
def maintain(st, cfg, avg):
    """Bring the model from B+1 back to B SVs; return ||Delta||^2 in true units.

    With ``avg`` true the averaged sums ``Abar`` get the same edit (merge weights,
    projection, removal) after the SVs involved are flushed.

    removal: drop p = argmin ||a_j||^2 k_jj, ||Delta||^2 = ||a_p||^2 k_pp.  O(B).
    projection: a_j += a_p d_j with d = (K_-p + rI)^-1 k_-p,p read off the maintained
    inverse M = (K + rI)^-1 as d = -M[:, p] / M[p, p]; ||Delta||^2 = ||a_p||^2 (k_pp - k.d
    - r ||d||^2); M is downdated in place. O(B^2).
    merging: p = m as above; partner n and h from :func:`merge_partner`. O(B) (+ O(B d)
    for the kernel row of the merged point).
    """
    if cfg.maint == MERGE:
        return _merge_step(st, cfg, avg)
    if cfg.maint == REMOVE:
        return _remove_step(st, avg)
    return _project_step(st, cfg, avg)


@njit(cache=True, nogil=True)
def _remove_step(st, avg):
    """Removal: drop the SV of least ||a_j||^2 k_jj (chosen on the iterate and the averaged
    model together when averaging has started)."""
    n_sv = st.ist[IS_NSV]
    s = st.fs[FS_SCALE]
    if avg and st.fs[FS_WSUM] > 0.0:
        p, v = _smallest(_joint(st.A, st.Abar, st.sref, st.fs, n_sv), st.K, n_sv)
        v /= s * s
    else:
        p, v = _smallest(st.A, st.K, n_sv)
    st.ist[IS_NSV] = _swap_remove(st, p, n_sv, False, avg)
    return v * s * s


@njit(cache=True, nogil=True)
def _merge_choice(st, cfg, avg):
    """The SV m to merge away, its partner n, the merge weight h and the degradation^2 in
    unscaled units (chosen on the iterate and the averaged model together, in true units,
    once averaging has started)."""
    n_sv = st.ist[IS_NSV]
    s = st.fs[FS_SCALE]
    if avg and st.fs[FS_WSUM] > 0.0:
        C = _joint(st.A, st.Abar, st.sref, st.fs, n_sv)
        m, _ = _smallest(C, st.K, n_sv)
        n, h, dg = merge_partner(C, st.K, n_sv, m, cfg.pw, NEAR, cfg.T)
        return m, n, h, dg / (s * s)
    m, _ = _smallest(st.A, st.K, n_sv)
    search = cfg.search if st.A.shape[1] == 1 else NEAR
    n, h, dg = merge_partner(st.A, st.K, n_sv, m, cfg.pw, search, cfg.T)
    return m, n, h, dg


@njit(cache=True, nogil=True)
def _merge_step(st, cfg, avg):
    """Merging: SVs m and n become z = h x_m + (1 - h) x_n in m's slot (n's slot is freed),
    with the coefficients of the closest point of the pair's span (for the iterate and,
    with ``avg``, the averaged sums); z's kernel row is recomputed."""
    m, n, h, dg = _merge_choice(st, cfg, avg)
    SV, A, Abar, K, fs = st.SV, st.A, st.Abar, st.K, st.fs
    s = fs[FS_SCALE]
    c = A.shape[1]
    e1, e2 = _merge_weights(np.log(max(K[m, n], 1e-300)), cfg.pw, h)
    az = np.empty(c)
    for i in range(c):
        az[i] = A[m, i] * e1 + A[n, i] * e2
    azbar = np.empty(c)
    if avg:
        _flush(m, A, Abar, st.sref, fs[FS_SACC])
        _flush(n, A, Abar, st.sref, fs[FS_SACC])
        for i in range(c):
            azbar[i] = Abar[m, i] * e1 + Abar[n, i] * e2
    z = h * SV[m] + (1.0 - h) * SV[n]
    last = st.ist[IS_NSV] - 1
    n_sv = _swap_remove(st, n, st.ist[IS_NSV], False, avg)
    if m == last:
        m = n
    zsq = sq_norm(z)
    _put_sv(st, m, z, zsq)
    A[m, :] = az
    if avg:
        Abar[m, :] = azbar
        st.sref[m] = fs[FS_SACC]
    kz = np.empty(n_sv)
    krow_into(cfg.kind, cfg.gamma, cfg.degree, cfg.coef0, z, zsq, st.SVT, st.sqn, n_sv, kz)
    for j in range(n_sv):
        K[m, j] = kz[j]
        K[j, m] = kz[j]
    st.ist[IS_NSV] = n_sv
    return dg * s * s


@njit(cache=True, nogil=True)
def _project_step(st, cfg, avg):
    """Projection: the SV of least ||a_j||^2 k_jj is projected onto the span of the others
    (the maintained inverse is refreshed when stale or unusable), then removed."""
    n_sv = st.ist[IS_NSV]
    K, M, ist = st.K, st.M, st.ist
    p, _ = _smallest(st.A, K, n_sv)
    mpp = M[p, p]
    if not (mpp > 0.0) or ist[IS_SINCE] >= cfg.budget:
        refresh_inverse(K, M, n_sv, cfg.ridge)
        ist[IS_SINCE] = 0
        mpp = M[p, p]
    ist[IS_SINCE] += 1
    if avg:
        flush_average(st.A, st.Abar, st.sref, st.fs, n_sv)
    d2 = _project_coefs(st, p, mpp, n_sv, cfg.ridge, avg)
    _downdate_inverse(M, p, mpp, n_sv)
    ist[IS_NSV] = _swap_remove(st, p, n_sv, True, avg)
    s = st.fs[FS_SCALE]
    return d2 * s * s


@njit(cache=True, nogil=True)
def _project_coefs(st, p, mpp, n_sv, ridge, avg):
    """a_j += a_p d_j for every j != p (and the same for the averaged sums); returns
    ||Delta||^2 in unscaled units."""
    A, Abar, K, M = st.A, st.Abar, st.K, st.M
    c = A.shape[1]
    dk = 0.0
    dd = 0.0
    a2 = 0.0
    for i in range(c):
        a2 += A[p, i] * A[p, i]
    for j in range(n_sv):
        if j == p:
            continue
        dj = -M[j, p] / mpp
        dk += dj * K[j, p]
        dd += dj * dj
        for i in range(c):
            A[j, i] += dj * A[p, i]
        if avg:
            for i in range(c):
                Abar[j, i] += dj * Abar[p, i]
    res = K[p, p] - dk - ridge * dd
    if res < 0.0:
        res = 0.0
    return a2 * res


@njit(cache=True, nogil=True)
def _downdate_inverse(M, p, mpp, n_sv):
    """M <- the inverse without row and column p (Schur complement on p, in place)."""
    for i in range(n_sv):
        if i == p:
            continue
        f = M[i, p] / mpp
        if f == 0.0:
            continue
        for j in range(n_sv):
            if j != p:
                M[i, j] -= f * M[p, j]


@njit(cache=True, nogil=True)
def exact_wnorm2(A, K, b, fs, n_sv, icpt):
    """||w||^2 = s^2 (sum_i a_i^T K a_i + ||b||^2) when the intercept feature is on."""
    s = fs[FS_SCALE]
    tot = 0.0
    c = A.shape[1]
    for i in range(c):
        for j in range(n_sv):
            aj = A[j, i]
            if aj == 0.0:
                continue
            r = 0.0
            for l in range(n_sv):
                r += K[j, l] * A[l, i]
            tot += aj * r
        if icpt > 0.0:
            tot += b[i] * b[i]
    return tot * s * s


# ----------------------------------------------------------------------------- the SGD loop
@njit(cache=True, nogil=True)
def sgd_chunk(X, yi, w, st, cfg):
    """One pass over the rows of X in the given order (the whole per-example loop).

    ``yi`` holds class indices (binary: 0 -> -1, 1 -> +1); ``w`` the sample weights (a
    weight scales the step); ``st`` (:class:`BSGDState`) is updated in place under ``cfg``
    (:class:`BSGDConfig`). Per example: scores from the SVs (O(B d)), the shrink
    ``s <- (1 - eta alpha) s`` (O(1)), an SV added when the hinge is violated, budget
    maintenance at B + 1, the optional projection onto ``||w|| <= radius``, and, from step
    ``avg_start`` on, the O(1) update of the averaged iterate (``avg_mode > 0``).
    """
    c = st.A.shape[1]
    avg = cfg.avg_mode != AVG_OFF
    krow = np.empty(cfg.budget + 1)
    f = np.empty(c)
    for ii in range(X.shape[0]):
        x = X[ii]
        xsq = sq_norm(x)
        st.ist[IS_T] += 1
        t = st.ist[IS_T]
        eta = _step_size(cfg, t)
        _scores(st, cfg, x, xsq, krow, f)
        y = yi[ii]
        viol, r, yy = _hinge(f, y)
        _shrink(st, cfg, eta, f, avg)
        if viol:
            st.ist[IS_VIOL] += 1
        if viol and w[ii] > 0.0:
            _add_sv(st, cfg, x, xsq, y, r, yy, eta * w[ii] / st.fs[FS_SCALE], krow, f, avg)
        if avg and t >= cfg.avg_start:
            _average_step(st, cfg, t)


# The per-row steps below are inlined into sgd_chunk at numba's IR level ("always"), so the
# loop compiles to one body, as if written out in place.
@njit(cache=True, nogil=True, inline="always")
def _step_size(cfg, t):
    """eta_t of the learning-rate family."""
    if cfg.algo == PEGASOS:
        return 1.0 / (cfg.alpha * t)
    if cfg.algo == NORMA:
        return cfg.eta0 / np.sqrt(t)
    return cfg.eta0


@njit(cache=True, nogil=True, inline="always")
def _scores(st, cfg, x, xsq, krow, f):
    """f <- s (sum_j a_j k(x, x_j) + icpt b); krow <- the kernel values k(x, x_j)."""
    A = st.A
    c = A.shape[1]
    n_sv = st.ist[IS_NSV]
    krow_into(cfg.kind, cfg.gamma, cfg.degree, cfg.coef0, x, xsq, st.SVT, st.sqn, n_sv, krow)
    for i in range(c):  # each column's sum in a register (over the SVs in order)
        acc = st.b[i] * cfg.icpt
        for j in range(n_sv):
            acc += A[j, i] * krow[j]
        f[i] = acc
    s = st.fs[FS_SCALE]
    for i in range(c):
        f[i] *= s


@njit(cache=True, nogil=True, inline="always")
def _hinge(f, y):
    """(violated?, runner-up class r, binary sign yy) of class y under the scores f."""
    c = f.shape[0]
    if c == 1:
        yy = 1.0 if y == 1 else -1.0
        return yy * f[0] < 1.0, -1, yy
    r = -1
    best = -np.inf
    for i in range(c):
        if i != y and f[i] > best:
            best = f[i]
            r = i
    return f[y] - best < 1.0, r, 1.0


@njit(cache=True, nogil=True, inline="always")
def _shrink(st, cfg, eta, f, avg):
    """w <- (1 - eta alpha) w through the global scale (the scores f with it); a factor
    <= 0 empties the model, a tiny scale is folded into the coefficients."""
    if cfg.algo == PERCEPTRON or not cfg.alpha > 0.0:
        return
    A, fs = st.A, st.fs
    n_sv = st.ist[IS_NSV]
    s = fs[FS_SCALE]
    fac = 1.0 - eta * cfg.alpha
    if fac <= 0.0:
        A[:n_sv, :] = 0.0
        st.b[:] = 0.0
        if avg:  # the dropped SVs leave the average too (only at t = 1 for pegasos)
            st.Abar[:n_sv, :] = 0.0
        st.ist[IS_NSV] = 0
        s = 1.0
        fs[FS_WNORM2] = 0.0
        f[:] = 0.0
    else:
        s *= fac
        fs[FS_WNORM2] *= fac * fac
        for i in range(f.shape[0]):
            f[i] *= fac
        if s < _MIN_SCALE:
            if avg:
                flush_average(A, st.Abar, st.sref, fs, n_sv)
            A[:n_sv, :] *= s
            st.b[:] *= s
            s = 1.0
    fs[FS_SCALE] = s


@njit(cache=True, nogil=True)
def _add_sv(st, cfg, x, xsq, y, r, yy, beta, krow, f, avg):
    """x joins the SVs with step beta (unscaled) for class y (against r, multi-class);
    then the inverse grows (projection), the budget is restored and ||w|| is bounded."""
    A, K, fs = st.A, st.K, st.fs
    n_sv = st.ist[IS_NSV]
    c = A.shape[1]
    s = fs[FS_SCALE]
    _put_sv(st, n_sv, x, xsq)
    A[n_sv, :] = 0.0
    if avg:
        st.Abar[n_sv, :] = 0.0
        st.sref[n_sv] = fs[FS_SACC]
    if c == 1:
        A[n_sv, 0] = yy * beta
        st.b[0] += yy * beta * cfg.icpt
        gain = yy * f[0]
    else:
        A[n_sv, y] = beta
        A[n_sv, r] = -beta
        st.b[y] += beta * cfg.icpt
        st.b[r] -= beta * cfg.icpt
        gain = f[y] - f[r]
    kxx = kval(cfg.kind, cfg.gamma, cfg.degree, cfg.coef0, x, xsq, x, xsq)
    for j in range(n_sv):
        K[n_sv, j] = krow[j]
        K[j, n_sv] = krow[j]
    K[n_sv, n_sv] = kxx
    if cfg.radius > 0.0:
        bt = beta * s
        n_terms = 1.0 if c == 1 else 2.0  # coefficients the step touched
        fs[FS_WNORM2] += 2.0 * bt * gain + n_terms * bt * bt * (kxx + cfg.icpt * cfg.icpt)
    ok = True
    if cfg.maint == PROJECT:
        if n_sv == 0:
            st.M[0, 0] = 1.0 / (kxx + cfg.ridge)
        else:
            ok = _inverse_add(st.M, K, n_sv, kxx, cfg.ridge)
    st.ist[IS_NSV] = n_sv + 1
    if not ok:
        refresh_inverse(K, st.M, n_sv + 1, cfg.ridge)
        st.ist[IS_SINCE] = 0
    if n_sv + 1 > cfg.budget:
        _over_budget(st, cfg, avg)
    if cfg.radius > 0.0 and fs[FS_WNORM2] > cfg.radius * cfg.radius:
        fs[FS_SCALE] *= cfg.radius / np.sqrt(fs[FS_WNORM2])
        fs[FS_WNORM2] = cfg.radius * cfg.radius


@njit(cache=True, nogil=True)
def _over_budget(st, cfg, avg):
    """One maintenance step and its statistics (||w||^2 recomputed under a radius)."""
    d2 = maintain(st, cfg, avg)
    st.fs[FS_DEGR] += np.sqrt(d2)
    st.fs[FS_DEGR2] += d2
    st.ist[IS_NMAINT] += 1
    if cfg.radius > 0.0:
        st.fs[FS_WNORM2] = exact_wnorm2(st.A, st.K, st.b, st.fs, st.ist[IS_NSV], cfg.icpt)


@njit(cache=True, nogil=True, inline="always")
def _average_step(st, cfg, t):
    """The O(1) update of the averaged iterate at step t (see the module docstring)."""
    om = 1.0 if cfg.avg_mode == AVG_UNIFORM else float(t - cfg.avg_start + 1)
    sc = om * st.fs[FS_SCALE]
    st.fs[FS_SACC] += sc
    st.fs[FS_WSUM] += om
    if cfg.icpt > 0.0:
        for i in range(st.b.shape[0]):
            st.bbar[i] += sc * st.b[i]


@njit(cache=True, nogil=True)
def reduce_to(st, cfg):
    """Budget maintenance until at most ``cfg.budget`` SVs are left (the combine step of the
    distributed fit: a union of partial models brought down to B), without averaging.

    ``st.K`` must hold the kernel matrix of the ``st.ist[IS_NSV]`` SVs (and ``st.M`` room
    for its ridge inverse for projection). Returns the sum of ||Delta|| and of ||Delta||^2
    over the steps.
    """
    dg = 0.0
    dg2 = 0.0
    if cfg.maint == PROJECT:
        refresh_inverse(st.K, st.M, st.ist[IS_NSV], cfg.ridge)
        st.ist[IS_SINCE] = 0
    while st.ist[IS_NSV] > cfg.budget:
        d2 = maintain(st, cfg, False)
        dg += np.sqrt(d2)
        dg2 += d2
    return dg, dg2


@njit(cache=True, nogil=True)
def decision(X, st, cfg):
    """Scores s (sum_j a_j k(x, x_j) + icpt b) for the rows of X (the loop's arithmetic)."""
    out = np.empty((X.shape[0], st.A.shape[1]))
    krow = np.empty(st.SV.shape[0])
    for ii in range(X.shape[0]):
        _scores(st, cfg, X[ii], sq_norm(X[ii]), krow, out[ii])
    return out


@njit(cache=True, nogil=True)
def weighted_colsums(X, G, square):
    """``X^T G`` (``(X * X)^T G`` when ``square``), shape (d, c): the rows added in their
    order, each column of the result an axpy over the rows (no reassociation), so the sums
    are the same bits wherever and however often they are computed (BLAS's transposed
    products depend on its threads and blocking). Rows whose weights are all zero are skipped."""
    n, d = X.shape
    c = G.shape[1]
    out = np.zeros((c, d))
    for i in range(n):
        for k in range(c):
            g = G[i, k]
            if g != 0.0:
                if square:
                    for j in range(d):
                        out[k, j] += g * X[i, j] * X[i, j]
                else:
                    for j in range(d):
                        out[k, j] += g * X[i, j]
    return out.T.copy()
