"""Choosing the number of components k from the data: held-out likelihood of the mixture.

Algorithm 1 (Kong et al. (2020); ``docs/algorithms.md``) takes k as given. To
choose it, the light2 tasks are split into a fitting part and a validation part
(:func:`validation_tasks`: every ``every``-th task), Algorithm 1 is run for each
candidate k = 1..k_max on the fitting part, and each fitted mixture (W, s², p)
is scored by the log-likelihood of the validation tasks,

    ℓᵢ(k) = log Σ_j p_j N(yᵢ; Xᵢ w_j, s_j² I)                 (one task, τᵢ rows)
          = logsumexp_j [log p_j − (τᵢ/2) log(2π s_j²) − ‖yᵢ − Xᵢ w_j‖²/(2 s_j²)]

(:func:`mixture_log_likelihood`). The sums Σᵢ ℓᵢ(k) and Σᵢ ℓᵢ(k) ℓᵢ(k') are
additive over chunks of work (:func:`heldout_loglik_sums`), so the paired
standard error of ℓ(k) − ℓ(k') comes from one pass. :func:`choose_k` applies
the one-standard-error rule: k* maximises the mean held-out log-likelihood, and
the chosen k is the smallest whose mean is within one paired standard error of
k*'s. Extra components that only split a true one leave the likelihood where it
was (within noise), so the rule stops at the true k; too few components lose
much more than a standard error.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from streamlsq.kernels.mlr.predict import component_log_scores

__all__ = [
    "choose_k",
    "heldout_loglik_sums",
    "mixture_log_likelihood",
    "validation_tasks",
]


def validation_tasks(n_tasks: int, every: int = 4) -> np.ndarray:
    """Mask (n_tasks,) of the validation tasks: positions every−1, 2·every−1, … (a 1/every share).

    Examples
    --------
    >>> validation_tasks(9, every=4).astype(int).tolist()
    [0, 0, 0, 1, 0, 0, 0, 1, 0]
    """
    if isinstance(every, bool) or not isinstance(every, int | np.integer) or every < 2:
        raise ValueError(f"every must be an integer >= 2, got {every!r}")
    return np.arange(int(n_tasks)) % every == every - 1


def mixture_log_likelihood(X, y, task_ptr, W, s2, p) -> np.ndarray:
    """Per-task log-likelihood (n_tasks,) of the rows under the mixture (W, s², p).

    logsumexp_j [log p_j − (τᵢ/2) log(2π s_j²) − SSE_ij/(2 s_j²)]; a component
    with p_j = 0 contributes nothing; a task without rows gets 0.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0], [1.0]]); y = np.array([0.0, 0.0])
    >>> ll = mixture_log_likelihood(X, y, np.array([0, 2]), np.array([[0.0]]), np.array([1.0]),
    ...                             np.array([1.0]))
    >>> bool(np.isclose(ll[0], -np.log(2 * np.pi)))  # two rows of N(0, 1) at 0
    True
    """
    score, t = component_log_scores(X, y, task_ptr, W, s2, p)
    return logsumexp(score, axis=1) - 0.5 * t * np.log(2.0 * np.pi)


def heldout_loglik_sums(X, y, task_ptr, models) -> dict[str, np.ndarray]:
    """Additive sums of the per-task log-likelihoods under several fitted mixtures.

    ``models``: a sequence of (W, s2, p), one per candidate. Returns {"sum" (m,),
    "cross" (m, m) = Σᵢ ℓᵢℓᵢᵀ, "tasks" ()}: add them over chunks of
    work (``combine_stats``) and pass the total to :func:`choose_k`.
    """
    ll = np.column_stack([mixture_log_likelihood(X, y, task_ptr, *m) for m in models])
    return {"sum": ll.sum(axis=0), "cross": ll.T @ ll, "tasks": np.int64(ll.shape[0])}


def choose_k(sums: dict, candidates) -> dict:
    """The one-standard-error choice of k from :func:`heldout_loglik_sums` totals.

    mean(k) = Σℓ(k)/n; k* = argmax mean; se(k) = the standard error of the paired
    differences ℓ(k) − ℓ(k*) (from the cross sums); the chosen k is the smallest
    candidate with mean(k) ≥ mean(k*) − se(k). Returns {"k", "best", "mean" (m,),
    "se" (m,)}.

    Examples
    --------
    >>> import numpy as np
    >>> ll = np.array([[-9.0, -5.0, -5.1], [-8.0, -4.0, -3.9], [-10.0, -6.0, -6.0]])
    >>> choice = choose_k({"sum": ll.sum(0), "cross": ll.T @ ll, "tasks": 3}, [1, 2, 3])
    >>> choice["k"], choice["best"]
    (2, 2)
    """
    cand = np.asarray(candidates, dtype=np.int64)
    total = np.asarray(sums["sum"], dtype=np.float64)
    cross = np.asarray(sums["cross"], dtype=np.float64)
    n = int(sums["tasks"])
    m = cand.size
    if total.shape != (m,) or cross.shape != (m, m):
        raise ValueError(f"sums hold {total.shape} and {cross.shape} for {m} candidates")
    if n < 2:
        raise ValueError(f"choosing k needs at least 2 validation tasks, got {n}")
    if not (np.isfinite(total).all() and np.isfinite(cross).all()):
        raise ValueError("a held-out log-likelihood is not finite")
    mean = total / n
    b = int(np.argmax(mean))
    # Var(ℓ_k − ℓ_b) from the second moments: E[(ℓ_k − ℓ_b)²] − (mean_k − mean_b)²
    second = (np.diag(cross) + cross[b, b] - 2.0 * cross[:, b]) / n
    var = np.maximum(second - (mean - mean[b]) ** 2, 0.0) * n / (n - 1)
    se = np.sqrt(var / n)
    ok = mean >= mean[b] - se
    return {"k": int(cand[np.flatnonzero(ok)[0]]), "best": int(cand[b]), "mean": mean, "se": se}
