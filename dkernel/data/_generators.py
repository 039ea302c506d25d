"""Synthetic datasets from the papers, generated block by block.

Rows are made in fixed blocks of ``GEN_BLOCK`` rows, block ``i`` from
``SeedSequence([seed, i])``: the NumPy result and a store written with any ``chunk_rows``
hold the same rows, and a store can be larger than memory.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator

import numpy as np

from .._validation import DKernelError, check_scalar
from ._store import write_arrays

#: Rows of one generator block (each block has its own seeded generator).
GEN_BLOCK = 1 << 16


def _base_seed(random_state) -> int:
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise DKernelError(f"random_state must be >= 0, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    raise DKernelError(f"random_state must be None, an int or a generator, got {random_state!r}")


def _blocks(gen: Callable, n: int, seed: int, **kw) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for b, start in enumerate(range(0, n, GEN_BLOCK)):
        rows = min(GEN_BLOCK, n - start)
        rng = np.random.default_rng(np.random.SeedSequence([seed, b]))
        yield gen(rng, rows, start=start, **kw)


def _make(
    gen,
    name: str,
    n_samples: int,
    n_features: int,
    random_state,
    store,
    chunk_rows,
    overwrite,
    dtype,
    **kw,
):
    check_scalar(n_samples, "n_samples", kind=numbers.Integral, low=1)
    seed = _base_seed(random_state)
    try:
        ok = np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:
        ok = False
    if not ok:
        raise DKernelError(f"dtype must be float32 or float64, got {dtype!r}")
    dtype = np.dtype(dtype)
    blocks = ((X.astype(dtype, copy=False), y) for X, y in _blocks(gen, n_samples, seed, **kw))
    if store is None:
        Xs, ys = zip(*blocks)
        return np.concatenate(Xs), np.concatenate(ys)
    return write_arrays(
        store,
        blocks,
        n=n_samples,
        n_features=n_features,
        dtype=dtype,
        chunk_rows=chunk_rows,
        has_y=True,
        y_dtype=np.int64,
        attrs={"source": f"{name}(n_samples={n_samples}, seed={seed})"},
        overwrite=overwrite,
    )


_DOC_STORE = """
    random_state : int, RandomState, Generator or None
        Seed; the same seed gives the same rows with or without ``store``.
    store : str or os.PathLike, optional
        Write the rows chunk by chunk into this zarr store and return the opened
        :class:`~dkernel.data.Dataset` instead of arrays (sizes beyond memory).
    chunk_rows : int, optional
        Rows per zarr chunk.
    overwrite : bool, default=False
        Replace an existing store (atomically).
    dtype : {"float32", "float64"}, optional
        Default float32 for stores, float64 for arrays.
"""


def _store_doc(func):
    """Insert the shared ``random_state``/``store``/... parameter docs into a docstring."""
    func.__doc__ = func.__doc__.replace("{store_parameters}", _DOC_STORE.strip() + "\n")
    return func


def _checkerboard(rng, n, *, start, n_cells):
    X = rng.uniform(0.0, float(n_cells), size=(n, 2))
    cell = np.floor(X).astype(np.int64)
    y = np.where((cell[:, 0] + cell[:, 1]) % 2 == 0, 1, -1)
    return X, y


@_store_doc
def make_checkerboard(
    n_samples=10000,
    *,
    n_cells=4,
    random_state=None,
    store=None,
    chunk_rows=None,
    overwrite=False,
    dtype=None,
):
    """Uniform points on an ``n_cells x n_cells`` board with alternating labels -1/+1.

    The BSGD paper's checkerboard: X uniform on ``[0, n_cells)^2``, label +1 on cells whose
    row + column index is even.

    Parameters
    ----------
    n_samples : int
    n_cells : int, default=4
    {store_parameters}
    Returns
    -------
    X, y : ndarray of shape (n, 2) and (n,), or Dataset when ``store`` is given

    Examples
    --------
    >>> from dkernel.data import make_checkerboard
    >>> X, y = make_checkerboard(100, random_state=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((100, 2), [-1, 1])
    """
    check_scalar(n_cells, "n_cells", kind=numbers.Integral, low=1)
    return _make(
        _checkerboard,
        "make_checkerboard",
        n_samples,
        2,
        random_state,
        store,
        chunk_rows,
        overwrite,
        _dtype(dtype, store),
        n_cells=int(n_cells),
    )


def _gauss(rng, n, *, start):
    pos = rng.random(n) < 0.5
    X = np.empty((n, 2))
    X[pos] = rng.standard_normal((int(pos.sum()), 2))
    X[~pos] = np.array([2.0, 0.0]) + 2.0 * rng.standard_normal((int((~pos).sum()), 2))
    return X, np.where(pos, 1, -1)


@_store_doc
def make_gauss(
    n_samples=10000, *, random_state=None, store=None, chunk_rows=None, overwrite=False, dtype=None
):
    """Two overlapping Gaussians: class +1 from N((0,0), I), class -1 from N((2,0), 4I).

    The BSGD paper's ``gauss`` set (Bayes accuracy about 82%); classes equally likely.

    Parameters
    ----------
    n_samples : int
    {store_parameters}
    Returns
    -------
    X, y : ndarray of shape (n, 2) and (n,), or Dataset when ``store`` is given

    Examples
    --------
    >>> from dkernel.data import make_gauss
    >>> X, y = make_gauss(50, random_state=0)
    >>> X.shape
    (50, 2)
    """
    return _make(
        _gauss,
        "make_gauss",
        n_samples,
        2,
        random_state,
        store,
        chunk_rows,
        overwrite,
        _dtype(dtype, store),
    )


_I = np.arange(1, 22)
_H1 = np.maximum(6.0 - np.abs(_I - 11), 0.0)
_H2 = np.maximum(6.0 - np.abs(_I - 15), 0.0)  # h1 shifted right by 4
_H3 = np.maximum(6.0 - np.abs(_I - 7), 0.0)  # h1 shifted left by 4
_WAVE_PAIRS = ((_H1, _H2), (_H1, _H3), (_H2, _H3))


def _waveform(rng, n, *, start):
    y = rng.integers(0, 3, size=n)
    u = rng.random((n, 1))
    a = np.stack([_WAVE_PAIRS[c][0] for c in range(3)])[y]
    b = np.stack([_WAVE_PAIRS[c][1] for c in range(3)])[y]
    X = u * a + (1.0 - u) * b + rng.standard_normal((n, 21))
    return X, y


@_store_doc
def make_waveform(
    n_samples=5000, *, random_state=None, store=None, chunk_rows=None, overwrite=False, dtype=None
):
    """Breiman's waveform data: 21 features, 3 classes (0, 1, 2), each a random convex mix
    of two of three triangular base waves plus N(0, 1) noise.

    Parameters
    ----------
    n_samples : int
    {store_parameters}
    Returns
    -------
    X, y : ndarray of shape (n, 21) and (n,), or Dataset when ``store`` is given

    References
    ----------
    Breiman, Friedman, Olshen & Stone, "Classification and Regression Trees", 1984, §2.6.2.

    Examples
    --------
    >>> from dkernel.data import make_waveform
    >>> X, y = make_waveform(30, random_state=0)
    >>> X.shape, int(y.max()) <= 2
    ((30, 21), True)
    """
    return _make(
        _waveform,
        "make_waveform",
        n_samples,
        21,
        random_state,
        store,
        chunk_rows,
        overwrite,
        _dtype(dtype, store),
    )


def _pathological(rng, n, *, start, separation, spread):
    y = np.where(rng.random(n) < 0.5, 1, -1)
    X = np.empty((n, 2))
    X[:, 0] = y * separation + spread * rng.standard_normal(n)
    X[:, 1] = spread * rng.standard_normal(n)
    if start == 0:  # the two close points of different labels, near the origin
        k = min(2, n)
        X[:k] = np.array([[0.0, 0.05], [0.0, -0.05]])[:k]
        y[:k] = np.array([1, -1])[:k]
    return X, y


@_store_doc
def make_pathological(
    n_samples=10000,
    *,
    separation=10.0,
    spread=0.5,
    random_state=None,
    store=None,
    chunk_rows=None,
    overwrite=False,
    dtype=None,
):
    """Two far clusters of opposite labels plus two close points of different labels.

    The coreset paper's hard case for uniform sampling: nearly every point is easy, but
    the two points near the origin (rows 0 and 1, labels +1 and -1, 0.1 apart) decide the
    margin; a uniform sample almost never contains them, sensitivity sampling does.

    Parameters
    ----------
    n_samples : int
    separation : float, default=10.0
        Cluster centres at ``(-separation, 0)`` (label -1) and ``(+separation, 0)`` (+1).
    spread : float, default=0.5
        Standard deviation of each cluster.
    {store_parameters}
    Returns
    -------
    X, y : ndarray of shape (n, 2) and (n,), or Dataset when ``store`` is given

    Examples
    --------
    >>> from dkernel.data import make_pathological
    >>> X, y = make_pathological(100, random_state=0)
    >>> y[:2].tolist()
    [1, -1]
    """
    check_scalar(separation, "separation", low=0.0, low_inclusive=False)
    check_scalar(spread, "spread", low=0.0)
    return _make(
        _pathological,
        "make_pathological",
        n_samples,
        2,
        random_state,
        store,
        chunk_rows,
        overwrite,
        _dtype(dtype, store),
        separation=float(separation),
        spread=float(spread),
    )


def _rings(rng, n, *, start, n_rings, noise, width, inner_radius, spacing):
    y = rng.integers(0, n_rings, size=n)
    theta = rng.uniform(0.0, 2 * np.pi, size=n)
    r = (inner_radius + spacing * y) + noise * rng.standard_normal(n)
    X = np.empty((n, width))
    X[:, 0] = r * np.cos(theta)
    X[:, 1] = r * np.sin(theta)
    if width > 2:
        X[:, 2:] = noise * rng.standard_normal((n, width - 2))
    return X, y


@_store_doc
def make_rings(
    n_samples=3000,
    *,
    n_rings=3,
    noise=0.1,
    n_features=2,
    inner_radius=1.0,
    spacing=1.0,
    random_state=None,
    store=None,
    chunk_rows=None,
    overwrite=False,
    dtype=None,
):
    """Concentric rings of radius ``inner_radius + i * spacing``, label = ring index ``i``.

    Linear k-means cannot separate them. Kernel k-means with an RBF kernel separates a
    compact inner ring from a wide outer one (``n_rings=2, inner_radius=0.5, spacing=2``:
    ARI 1.0 at the median-heuristic width); on many equally spaced rings its objective
    prefers angular sectors, as the full-batch algorithm does too.

    Parameters
    ----------
    n_samples : int
    n_rings : int, default=3
    noise : float, default=0.1
        Radial noise, and the scale of the extra noise features.
    n_features : int, default=2
        Extra dimensions beyond 2 hold N(0, noise^2) noise (for wide scaling tests).
    inner_radius : float, default=1.0
        Radius of ring 0.
    spacing : float, default=1.0
        Distance between consecutive rings.
    {store_parameters}
    Returns
    -------
    X, y : ndarray of shape (n, n_features) and (n,), or Dataset when ``store`` is given

    Examples
    --------
    >>> from dkernel.data import make_rings
    >>> X, y = make_rings(60, n_rings=2, random_state=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((60, 2), [0, 1])
    """
    check_scalar(n_rings, "n_rings", kind=numbers.Integral, low=1)
    check_scalar(noise, "noise", low=0.0)
    check_scalar(n_features, "n_features", kind=numbers.Integral, low=2)
    check_scalar(inner_radius, "inner_radius", low=0.0)
    check_scalar(spacing, "spacing", low=0.0, low_inclusive=False)
    return _make(
        _rings,
        "make_rings",
        n_samples,
        int(n_features),
        random_state,
        store,
        chunk_rows,
        overwrite,
        _dtype(dtype, store),
        n_rings=int(n_rings),
        noise=float(noise),
        width=int(n_features),
        inner_radius=float(inner_radius),
        spacing=float(spacing),
    )


def _dtype(dtype, store):
    if dtype is not None:
        return dtype
    return np.float32 if store is not None else np.float64
