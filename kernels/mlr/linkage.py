"""Heavy tasks: projected estimates, pairwise distances and clustering; initial
per-cluster estimates (Algorithm 1, steps 2–3 of Kong et al., 2020;
``docs/algorithms.md#clustering`` and ``#initial-estimates``).

Each heavy task's rows are split into 2L contiguous groups and projected on the
subspace U (d, k):  aᵢ⁽ˡ⁾ = Uᵀβ̂ᵢ⁽²ˡ⁻¹⁾, cᵢ⁽ˡ⁾ = Uᵀβ̂ᵢ⁽²ˡ⁾ (l = 1..L), and

    Hᵢⱼ = median_l (aᵢ⁽ˡ⁾ − aⱼ⁽ˡ⁾)ᵀ(cᵢ⁽ˡ⁾ − cⱼ⁽ˡ⁾)

For one l the product is unbiased for ‖Uᵀ(βᵢ − βⱼ)‖² (a and c come from disjoint
rows, so they are independent given the tasks); the median of L such estimates
is the robust version the paper uses (not unbiased for L > 1, since each
estimate is skewed). Hᵢⱼ can be negative and Hᵢᵢ = 0.

Clustering is single linkage (the paper) or average linkage (the authors' code)
on H, cut at a number of clusters or at a distance threshold (Δ²/2 when the
separation Δ is known). Labels are canonical: clusters are numbered in the order
of their smallest task index.

How H is treated before linkage:
- the full-matrix functions symmetrise it, (H + Hᵀ)/2 (a no-op for H from
  :func:`pairwise_distance_block`, which is exactly symmetric; it matters for
  matrices from elsewhere);
- the diagonal is ignored (a task is not an edge to itself);
- negative estimates are kept as they are. Single linkage depends only on the
  order of the distances, so any monotone fix (clipping at 0) would only add
  ties; average linkage then averages the unbiased estimates themselves
  (the authors' code takes |H|, which biases near pairs apart). SciPy's linkage
  accepts negative dissimilarities; merge heights are reported in H's own scale.

When H does not fit in memory, single linkage comes from its minimum spanning
tree, built from upper-triangle tiles: each tile's minimum spanning forest
(:func:`tile_spanning_forest`, ≤ n_i + n_j − 1 edges) is computed where the tile
is, and forests are merged by Kruskal (:func:`merge_spanning_forests`, usable as
a tree reduction). This is exact: an edge missing from its tile's forest is the
heaviest edge on a cycle inside that tile, hence on a cycle of the whole graph,
hence (cycle property) not in the minimum spanning tree. Ties are broken by the
strict order (weight, i, j) on edges with i < j, which makes the tree unique and
the result independent of the tiling.
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.cluster.hierarchy import linkage as _scipy_linkage

from streamlsq.kernels.mlr.tasks import (
    as_task_rows,
    canonical_labels,
    check_labels,
    group_ptr,
    range_sums,
)
from streamlsq.kernels.mlr.tasks import task_ids as _task_ids

__all__ = [
    "average_linkage_labels",
    "cluster_residual_sums",
    "hierarchical_linkage",
    "initial_cluster_estimates",
    "linkage_labels",
    "merge_spanning_forests",
    "minimum_spanning_forest",
    "pairwise_distance_block",
    "projected_split_estimates",
    "residual_variance",
    "single_linkage_labels",
    "spanning_forest_labels",
    "tile_spanning_forest",
]


# -- projected estimates and distances -----------------------------------------
def _finite_matrix(A, name: str, d: int, axis: int, layout: str) -> np.ndarray:
    """``A`` as a float64 matrix with ``d`` entries along ``axis``, every one finite; else a
    ValueError naming ``name`` and its expected ``layout``."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[axis] != d:
        raise ValueError(f"{name} must be {layout}, got shape {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError(f"{name} has a non-finite value")
    return A


def _check_basis(U, d: int) -> np.ndarray:
    """The subspace basis U (d, k)."""
    return _finite_matrix(U, "U", d, 0, f"(d, k) with d = {d} features")


def projected_split_estimates(X, y, task_ptr, U, n_splits: int):
    """Projected split estimates (a, c) of heavy tasks, each (n_tasks, L, k).

    Rows of each task are split into 2L contiguous, near-equal groups;
    a[:, l] = Uᵀβ̂ from group 2l+1 and c[:, l] = Uᵀβ̂ from group 2l+2 (1-based
    groups, l 0-based), β̂ = mean of yⱼxⱼ over the group. Projection is done on
    the rows first (XU), which is the same linear map and d/k times cheaper.
    Every task needs at least 2L rows (refused by name otherwise).
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    if isinstance(n_splits, bool) or not isinstance(n_splits, int | np.integer) or n_splits < 1:
        raise ValueError(f"n_splits must be a positive integer, got {n_splits!r}")
    U = _check_basis(U, X.shape[1])
    n_tasks = ptr.size - 1
    gptr = group_ptr(ptr, 2 * n_splits)
    XU = X @ U
    B = range_sums(y[:, None] * XU, gptr) / np.diff(gptr).astype(np.float64)[:, None]
    B = B.reshape(n_tasks, 2 * n_splits, U.shape[1])
    return B[:, 0::2, :].copy(), B[:, 1::2, :].copy()


def _check_split_pair(a, c, name: str) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if a.ndim != 3 or a.shape != c.shape:
        raise ValueError(
            f"a_{name} and c_{name} must both be (n_tasks, L, k), got {a.shape} and {c.shape}"
        )
    if not (np.isfinite(a).all() and np.isfinite(c).all()):
        raise ValueError(f"a_{name} or c_{name} has a non-finite value")
    return a, c


def pairwise_distance_block(a_i, c_i, a_j, c_j) -> np.ndarray:
    """Block (n_i, n_j) of H: Hᵢⱼ = median_l (aᵢ⁽ˡ⁾ − aⱼ⁽ˡ⁾)ᵀ(cᵢ⁽ˡ⁾ − cⱼ⁽ˡ⁾).

    A compiled loop over pairs evaluates the definition itself (differences,
    then products), in a fixed order per pair and with no temporaries beyond
    the result (n_i·n_j·8 bytes). So every entry is the same number whatever
    the block or tile it is computed in, and the matrix is exactly symmetric
    (swapping i and j negates both differences). For even L the median is the
    mean of the two middle values, as ``np.median``.
    """
    a_i, c_i = _check_split_pair(a_i, c_i, "i")
    a_j, c_j = _check_split_pair(a_j, c_j, "j")
    if a_i.shape[1:] != a_j.shape[1:]:
        raise ValueError(
            f"blocks disagree on (L, k): {a_i.shape[1:]} for i and {a_j.shape[1:]} for j"
        )
    out = np.empty((a_i.shape[0], a_j.shape[0]), dtype=np.float64)
    _distance_block(
        np.ascontiguousarray(a_i),
        np.ascontiguousarray(c_i),
        np.ascontiguousarray(a_j),
        np.ascontiguousarray(c_j),
        out,
    )
    return out


@numba.njit(cache=True)
def _distance_block(a_i, c_i, a_j, c_j, out):
    n_i, L, k = a_i.shape
    n_j = a_j.shape[0]
    vals = np.empty(L)
    mid = L // 2
    for i in range(n_i):
        for j in range(n_j):
            for l in range(L):
                acc = 0.0
                for q in range(k):
                    acc += (a_i[i, l, q] - a_j[j, l, q]) * (c_i[i, l, q] - c_j[j, l, q])
                vals[l] = acc
            if L == 1:
                out[i, j] = vals[0]
                continue
            # insertion sort: L is small, and a library sort per pair costs more
            for l in range(1, L):
                v = vals[l]
                m = l - 1
                while m >= 0 and vals[m] > v:
                    vals[m + 1] = vals[m]
                    m -= 1
                vals[m + 1] = v
            out[i, j] = vals[mid] if L % 2 == 1 else 0.5 * (vals[mid - 1] + vals[mid])


# -- union-find (compiled: loops over edges and merges, never over rows) ------
@numba.njit(cache=True)
def _find(parent, a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@numba.njit(cache=True)
def _kruskal_keep(u, v, n_nodes):
    """Mask of the edges (already in increasing order) that Kruskal keeps."""
    parent = np.arange(n_nodes)
    size = np.ones(n_nodes, dtype=np.int64)
    keep = np.zeros(u.size, dtype=np.bool_)
    kept = 0
    for e in range(u.size):
        if kept == n_nodes - 1:
            break
        ra = _find(parent, u[e])
        rb = _find(parent, v[e])
        if ra != rb:
            if size[ra] < size[rb]:
                ra, rb = rb, ra
            parent[rb] = ra
            size[ra] += size[rb]
            keep[e] = True
            kept += 1
    return keep


@numba.njit(cache=True)
def _component_roots(u, v, n_nodes):
    parent = np.arange(n_nodes)
    for e in range(u.size):
        ra = _find(parent, u[e])
        rb = _find(parent, v[e])
        if ra != rb:
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb
    roots = np.empty(n_nodes, dtype=np.int64)
    for i in range(n_nodes):
        roots[i] = _find(parent, i)
    return roots


@numba.njit(cache=True)
def _linkage_leaf_pairs(children, n):
    """For each merge of a SciPy linkage, one leaf of each of the two merged clusters."""
    rep = np.empty(2 * n - 1, dtype=np.int64)
    for i in range(n):
        rep[i] = i
    u = np.empty(n - 1, dtype=np.int64)
    v = np.empty(n - 1, dtype=np.int64)
    for m in range(n - 1):
        u[m] = rep[children[m, 0]]
        v[m] = rep[children[m, 1]]
        rep[n + m] = u[m]
    return u, v


def _labels_from_edges(n_nodes: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    roots = _component_roots(u.astype(np.int64), v.astype(np.int64), int(n_nodes))
    return canonical_labels(roots)


def _check_cut(n_clusters, threshold) -> None:
    if (n_clusters is None) == (threshold is None):
        raise ValueError("give exactly one of n_clusters and threshold")
    if n_clusters is not None and (
        isinstance(n_clusters, bool)
        or not isinstance(n_clusters, int | np.integer)
        or n_clusters < 1
    ):
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
    if threshold is not None and not np.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")


# -- full-matrix linkage -------------------------------------------------------
def hierarchical_linkage(H, method: str = "single") -> np.ndarray:
    """SciPy linkage matrix Z (n−1, 4) of the symmetrised H ("single" or "average").

    H (n, n) is symmetrised, its diagonal ignored and its negative entries kept
    (see the module docstring). Merge heights Z[:, 2] are in H's scale.
    """
    if method not in ("single", "average"):
        raise ValueError(f"method must be 'single' or 'average', got {method!r}")
    H = np.asarray(H, dtype=np.float64)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be a square matrix, got shape {H.shape}")
    n = H.shape[0]
    iu, ju = np.triu_indices(n, 1)
    condensed = 0.5 * (H[iu, ju] + H[ju, iu])
    if not np.isfinite(condensed).all():
        e = int(np.flatnonzero(~np.isfinite(condensed))[0])
        raise ValueError(f"H has a non-finite value at ({int(iu[e])}, {int(ju[e])})")
    if n < 2:
        return np.empty((0, 4), dtype=np.float64)
    return _scipy_linkage(condensed, method=method)


def linkage_labels(Z, n_clusters: int | None = None, threshold: float | None = None):
    """Canonical flat clusters from a monotone linkage matrix Z (single, average).

    ``n_clusters``: undo the last n_clusters − 1 merges (exactly that many
    clusters, up to n). ``threshold``: keep the merges of height ≤ threshold
    (SciPy's ``fcluster(criterion="distance")``). Give exactly one of them.
    """
    _check_cut(n_clusters, threshold)
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[1] != 4:
        raise ValueError(f"Z must be a (n-1, 4) linkage matrix, got shape {Z.shape}")
    n = Z.shape[0] + 1
    heights = Z[:, 2]
    if np.any(np.diff(heights) < 0):
        raise ValueError("Z is not monotone (merge heights decrease); cut it with scipy fcluster")
    if n_clusters is not None:
        n_merges = max(0, n - int(n_clusters))
    else:
        n_merges = int(np.searchsorted(heights, threshold, side="right"))
    u, v = _linkage_leaf_pairs(Z[:, :2].astype(np.int64), n)
    return _labels_from_edges(n, u[:n_merges], v[:n_merges])


def single_linkage_labels(H, n_clusters: int | None = None, threshold: float | None = None):
    """Canonical single-linkage clusters of heavy tasks from the full matrix H.

    H is symmetrised, the diagonal ignored, negatives kept (module docstring).
    Cut at ``n_clusters`` or at ``threshold`` (Δ²/2 for a known separation Δ).
    """
    _check_cut(n_clusters, threshold)
    if np.shape(H)[:1] == (0,):
        return np.empty(0, dtype=np.int64)
    return linkage_labels(hierarchical_linkage(H, "single"), n_clusters, threshold)


def average_linkage_labels(H, n_clusters: int | None = None, threshold: float | None = None):
    """Canonical average-linkage (UPGMA) clusters from the full matrix H.

    Same handling of H as :func:`single_linkage_labels`; the authors' code uses
    this method (on |H|; here on H itself, so cluster averages stay unbiased).
    """
    _check_cut(n_clusters, threshold)
    if np.shape(H)[:1] == (0,):
        return np.empty(0, dtype=np.int64)
    return linkage_labels(hierarchical_linkage(H, "average"), n_clusters, threshold)


# -- single linkage from tiles ---------------------------------------------------
def _sorted_edges(i: np.ndarray, j: np.ndarray, w: np.ndarray):
    order = np.lexsort((j, i, w))
    return i[order], j[order], w[order]


def minimum_spanning_forest(edges, weights):
    """Kruskal's minimum spanning forest of an edge list.

    ``edges`` (m, 2) int node ids, ``weights`` (m,) finite (negative allowed).
    Each edge is stored as (min, max); self-loops are dropped. Edges are ordered
    by (weight, i, j), a strict order, so the forest is unique. Returns
    (edges (f, 2) int64 with i < j, weights (f,)) in that order.
    """
    E = np.asarray(edges)
    w = np.asarray(weights, dtype=np.float64)
    if E.ndim != 2 or E.shape[1] != 2 or w.shape != (E.shape[0],):
        raise ValueError(f"edges must be (m, 2) and weights (m,), got {E.shape} and {w.shape}")
    if E.size and E.dtype.kind not in "iu":
        raise ValueError(f"edges must be integer node ids, got dtype {E.dtype}")
    if not np.isfinite(w).all():
        bad = int(np.flatnonzero(~np.isfinite(w))[0])
        raise ValueError(f"weights has a non-finite value at index {bad}")
    E = E.astype(np.int64, copy=False)
    if E.size and E.min() < 0:
        raise ValueError("edges has a negative node id")
    i = np.minimum(E[:, 0], E[:, 1])
    j = np.maximum(E[:, 0], E[:, 1])
    loop = i == j
    i, j, w = i[~loop], j[~loop], w[~loop]
    if i.size == 0:
        return np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.float64)
    i, j, w = _sorted_edges(i, j, w)
    nodes, inverse = np.unique(np.concatenate([i, j]), return_inverse=True)
    inverse = inverse.ravel()
    keep = _kruskal_keep(inverse[: i.size], inverse[i.size :], nodes.size)
    return np.stack([i[keep], j[keep]], axis=1), w[keep]


def tile_spanning_forest(H_tile, row_start: int, col_start: int):
    """Minimum spanning forest of the edges one tile of H holds.

    ``H_tile`` is H[row_start:row_start+n_i, col_start:col_start+n_j]. Only the
    entries with global i < j are edges (the upper triangle: a diagonal tile
    contributes its strict upper part, a tile below the diagonal nothing), so
    the pipeline computes upper-triangle tiles only. Returns (edges (f, 2) with
    global ids i < j, weights (f,)), at most n_i + n_j − 1 edges.
    Prim's algorithm on the dense tile: O((n_i + n_j)²) time, O(n_i + n_j)
    extra memory, no sort of the tile's entries.
    """
    T = np.asarray(H_tile, dtype=np.float64)
    if T.ndim != 2:
        raise ValueError(f"H_tile must be 2-D, got shape {T.shape}")
    r0, c0 = int(row_start), int(col_start)
    if r0 < 0 or c0 < 0:
        raise ValueError(f"row_start and col_start must be >= 0, got {r0}, {c0}")
    if not np.isfinite(T).all():
        li, lj = np.argwhere(~np.isfinite(T))[0]
        raise ValueError(f"H_tile has a non-finite value at global ({r0 + li}, {c0 + lj})")
    n_i, n_j = T.shape
    # the tile's nodes: its rows and columns, as sorted global ids
    nodes = np.union1d(np.arange(r0, r0 + n_i), np.arange(c0, c0 + n_j)).astype(np.int64)
    u, v, w = _tile_prim(np.ascontiguousarray(T), r0, c0, nodes)
    if u.size == 0:
        return np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.float64)
    order = np.lexsort((v, u, w))
    return np.stack([u[order], v[order]], axis=1), w[order]


@numba.njit(cache=True)
def _edge_less(w1, a1, b1, w2, a2, b2):
    """(w1, a1, b1) < (w2, a2, b2) lexicographically: the strict order on edges."""
    if w1 != w2:
        return w1 < w2
    if a1 != a2:
        return a1 < a2
    return b1 < b2


@numba.njit(cache=True)
def _tile_prim(T, r0, c0, nodes):
    """Prim's algorithm on the tile's graph, O(V²) time and O(V) memory, no sort.

    Edge {x, y} (global ids x < y) exists iff x is a row and y a column of the
    tile; its weight is T[x − r0, y − c0]. Candidate edges are compared by the
    strict order (w, x, y), so the tree is the unique minimum spanning forest.
    A disconnected tile graph gives a forest (Prim restarts on a new node).
    """
    n_i, n_j = T.shape
    V = nodes.size
    in_tree = np.zeros(V, dtype=np.bool_)
    key_w = np.full(V, np.inf)
    key_lo = np.full(V, -1, dtype=np.int64)  # the candidate edge, as global ids
    key_hi = np.full(V, -1, dtype=np.int64)
    out_u = np.empty(max(V - 1, 0), dtype=np.int64)
    out_v = np.empty(max(V - 1, 0), dtype=np.int64)
    out_w = np.empty(max(V - 1, 0))
    n_out = 0
    for _ in range(V):
        best = -1
        for x in range(V):
            if in_tree[x]:
                continue
            if best == -1:
                best = x
            elif key_lo[x] >= 0 and (
                key_lo[best] < 0
                or _edge_less(
                    key_w[x], key_lo[x], key_hi[x], key_w[best], key_lo[best], key_hi[best]
                )
            ):
                best = x
        in_tree[best] = True
        if key_lo[best] >= 0:
            out_u[n_out] = key_lo[best]
            out_v[n_out] = key_hi[best]
            out_w[n_out] = key_w[best]
            n_out += 1
        g = nodes[best]
        for y in range(V):
            if in_tree[y]:
                continue
            h = nodes[y]
            lo = min(g, h)
            hi = max(g, h)
            if lo < r0 or lo >= r0 + n_i or hi < c0 or hi >= c0 + n_j:
                continue
            w = T[lo - r0, hi - c0]
            if key_lo[y] < 0 or _edge_less(w, lo, hi, key_w[y], key_lo[y], key_hi[y]):
                key_w[y] = w
                key_lo[y] = lo
                key_hi[y] = hi
    return out_u[:n_out], out_v[:n_out], out_w[:n_out]


def merge_spanning_forests(*forests):
    """Minimum spanning forest of the union of forests ((edges, weights) pairs).

    MSF(A ∪ B) = MSF(MSF(A) ∪ MSF(B)), so this is an associative combine for a
    tree reduction over tiles.
    """
    if not forests:
        raise ValueError("merge_spanning_forests needs at least one forest")
    edges = [np.asarray(f[0]).reshape(-1, 2) for f in forests]
    weights = [np.asarray(f[1], dtype=np.float64).ravel() for f in forests]
    return minimum_spanning_forest(np.concatenate(edges).astype(np.int64), np.concatenate(weights))


def spanning_forest_labels(
    n_nodes: int, edges, weights, n_clusters: int | None = None, threshold: float | None = None
) -> np.ndarray:
    """Canonical single-linkage clusters of nodes 0..n_nodes−1 from a spanning forest.

    ``n_clusters``: drop the n_clusters − 1 heaviest tree edges (in the (w, i, j)
    order); ``threshold``: keep tree edges with weight ≤ threshold. Equal to
    :func:`single_linkage_labels` on the full matrix (up to ties). Refuses a
    forest with more components than n_clusters (a tile is missing).
    """
    _check_cut(n_clusters, threshold)
    n_nodes = int(n_nodes)
    E, w = minimum_spanning_forest(
        np.asarray(edges).reshape(-1, 2) if np.size(edges) else np.empty((0, 2), np.int64),
        np.asarray(weights, dtype=np.float64).ravel(),
    )
    if E.size and E.max() >= n_nodes:
        raise ValueError(f"edges name node {int(E.max())}, but n_nodes = {n_nodes}")
    if n_clusters is not None:
        components = n_nodes - E.shape[0]
        if components > n_clusters:
            raise ValueError(
                f"the spanning forest has {components} components, more than "
                f"n_clusters = {n_clusters}; were all tiles of H included?"
            )
        n_keep = max(0, n_nodes - int(n_clusters))
    else:
        n_keep = int(np.searchsorted(w, threshold, side="right"))
    return _labels_from_edges(n_nodes, E[:n_keep, 0], E[:n_keep, 1])


# -- initial estimates (step 3) -----------------------------------------------
def _n_clusters_of(labels: np.ndarray, n_clusters) -> int:
    if n_clusters is None:
        return int(labels.max()) + 1 if labels.size else 0
    return int(n_clusters)


def initial_cluster_estimates(a, c, labels, U, n_clusters: int | None = None):
    """ŵ_ℓ = U · mean_{i∈C_ℓ} (projected β̂ᵢ) and p̂_ℓ = |C_ℓ| / n_H.

    The projected β̂ᵢ of a heavy task is the mean of its 2L projected group
    estimates (a and c of :func:`projected_split_estimates`). Returns
    (W (n_clusters, d), p (n_clusters,)). Refuses an empty cluster by name.
    """
    a, c = _check_split_pair(a, c, "")
    n_tasks, L, k = a.shape
    U = np.asarray(U, dtype=np.float64)
    if U.ndim != 2 or U.shape[1] != k:
        raise ValueError(f"U must be (d, {k}) to match a and c, got shape {U.shape}")
    lab = np.asarray(labels)
    K = _n_clusters_of(lab, n_clusters)
    lab = check_labels(lab, n_tasks, K)
    proj = (a.sum(axis=1) + c.sum(axis=1)) / (2 * L)
    counts = np.bincount(lab, minlength=K)
    if (counts == 0).any():
        raise ValueError(f"cluster {int(np.flatnonzero(counts == 0)[0])} has no heavy task")
    sums = np.zeros((K, k))
    np.add.at(sums, lab, proj)
    W = (sums / counts[:, None]) @ U.T
    return W, counts / n_tasks


def cluster_residual_sums(X, y, task_ptr, labels, W):
    """Residual sums of the labelled tasks of one chunk of work under the per-cluster ŵ.

    sse_ℓ = Σ over rows of tasks in cluster ℓ of (yⱼ − ŵ_ℓᵀxⱼ)², rows_ℓ their
    number. Returns (sse (k,), rows (k,) int64); additive over chunks of work, then
    r̂²_ℓ = sse_ℓ / rows_ℓ (:func:`residual_variance`).
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    W = _check_coef(W, X.shape[1])
    K = W.shape[0]
    lab = check_labels(labels, ptr.size - 1, K)
    row_lab = lab[_task_ids(ptr)]
    pred = (X @ W.T)[np.arange(X.shape[0]), row_lab]
    resid2 = (y - pred) ** 2
    sse = np.bincount(row_lab, weights=resid2, minlength=K).astype(np.float64)
    rows = np.bincount(row_lab, minlength=K).astype(np.int64)
    return sse, rows


def residual_variance(sse, rows) -> np.ndarray:
    """r̂²_ℓ = sse_ℓ / rows_ℓ; refuses a cluster without rows or with zero residual."""
    sse = np.asarray(sse, dtype=np.float64)
    rows = np.asarray(rows)
    if sse.shape != rows.shape or sse.ndim != 1:
        raise ValueError(f"sse and rows must be matching 1-D arrays, got {sse.shape}, {rows.shape}")
    if (rows <= 0).any():
        raise ValueError(f"cluster {int(np.flatnonzero(rows <= 0)[0])} has no rows")
    r2 = sse / rows
    if not (r2 > 0).all():
        raise ValueError(
            f"cluster {int(np.flatnonzero(~(r2 > 0))[0])} has zero residual variance; "
            "its likelihood is degenerate"
        )
    return r2


def _check_coef(W, d: int) -> np.ndarray:
    """The per-cluster coefficients W (n_clusters, d)."""
    return _finite_matrix(W, "W", d, 1, f"(n_clusters, d) with d = {d}")
