"""What a stream fit and the jobs around it take, declared once: :data:`FIT` (a recursion
over a stream store: :func:`streamlsq.fit_stream`, ``streamlsq fit NAME``), the options of
a fit of several stores (:data:`SEVERAL_STORES`) and of interleaved KF4LLS' own job
(:data:`INTERLEAVED`), of applying a fit to new rows (:data:`PREDICT_STREAM`), of a robust
covariance after a fit (:data:`ROBUST`) and of writing a table as a store
(:data:`CONVERT`).

A recursion's own parameters (``--ridge``, ``--forgetting``, …) are declared by the
recursion; :func:`fit_options` joins them to a fit's options, a recursion's parameter
taking the place of a fit's option of the same name (interleaved KF4LLS' mixing weight
``alpha`` that of the statistics' ``alpha``).

Examples
--------
>>> from streamlsq.options.fit import FIT
>>> FIT.check({"engine": "scan", "block_size": 1000.0})["block_size"]
1000
>>> FIT.check({"missing": "keep"})
Traceback (most recent call last):
...
streamlsq.errors.InputError: missing must be 'raise' or 'drop', got 'keep'
>>> FIT.check({"groups": "firm"})
Traceback (most recent call last):
...
streamlsq.errors.InputError: --groups VAR goes with --cov-type cluster or hac-panel
"""

from __future__ import annotations

from collections.abc import Iterable

from streamlsq.errors import InputError
from streamlsq.options import Options, Param, Rule
from streamlsq.options.common import DTYPE, FLOAT_DTYPES

__all__ = ["ALPHA_ESTIMATORS", "ALPHA_GIVEN_OR_ESTIMATED", "CONF_ALPHA", "CONVERT",
           "COV_TYPES", "DTYPES", "ENGINES", "FIT", "HAC_KERNEL", "INTERLEAVED",
           "JOB_OPTIONS", "MISSING", "PREDICT_STREAM", "RECURSION_RULES", "ROBUST",
           "SEVERAL_STORES",
           "fit_options", "label_variables", "names"]

#: the covariance types of a least-squares fit's coefficients: statsmodels' names
COV_TYPES = ("nonrobust", "HC0", "HC1", "HC2", "HC3", "cluster", "HAC", "hac-panel",
             "hac-groupsum")
#: the engines of a fit: an in-order fold, or parallel sums and a prefix scan
ENGINES = ("sequential", "scan")
#: the floating-point types of a fit's arithmetic
DTYPES = FLOAT_DTYPES
#: what a NaN in a selected variable does: refused, or its row left out
MISSING = ("raise", "drop")
#: ways to estimate interleaved KF4LLS' α from the three populations
ALPHA_ESTIMATORS = ("means", "grid")
#: the refusal of an interleaved fit given both α and a way to estimate it, or neither
ALPHA_GIVEN_OR_ESTIMATED = ("give either --alpha A (a number in [0, 1]) or --estimate-alpha "
                            f"{'|'.join(ALPHA_ESTIMATORS)}, not both or neither")


def names(value):
    """Variable or column names from the command line's comma-separated text
    (``"a,b,c"`` → ``["a", "b", "c"]``); a value that is not text as it is."""
    if not isinstance(value, str):
        return value
    return [name.strip() for name in value.split(",") if name.strip()]


#: which variables of a store, along which dimension (a fit's, or new rows')
_GROUP = Param("group", None, "Group of the store holding X and y.", type=str, optional=True)
_X = Param("x", None, "Feature variables: one 2-D variable (default X) or several 1-D ones, "
           "comma-separated (a,b,c), all along --sample-dim.", type=object, optional=True,
           metavar="NAMES")
_Y = Param("y", None, "Target variables (default y), comma-separated.", type=object,
           optional=True, metavar="NAMES")
_SAMPLE_DIM = Param("sample_dim", None, "The dimension rows are stored along (default: "
                    "sample).", type=str, optional=True, metavar="DIM")

_ENGINE = Param("engine", "sequential", "In-order fold, or parallel sums + prefix scan.",
                type=str, choices=ENGINES)
_BLOCK_SIZE = Param("block_size", None, "Rows per step (default: the store's block_size "
                    "attribute or chunk size).", type=int, gt=0, optional=True)
_RECORD_EVERY = Param("record_every", None, "Record coefficients every N steps (default: "
                      "~1000 steps in all).", type=int, gt=0, optional=True)
_DTYPE = DTYPE.replace(help="Precision of the computation.")
_SEGMENT_BYTES = Param("segment_bytes", None, "MB of X per Dask task (default: sequential "
                       "256; scan sized from the data and the workers, in pieces of 32; at "
                       "most a sixteenth of the smallest worker memory limit).", type=int,
                       gt=0, optional=True, flag="--segment-size", unit="MB", scale=2**20)
#: the α of the confidence intervals of a least-squares fit's statistics (1 − α coverage)
CONF_ALPHA = Param("alpha", 0.05, "Level of the confidence intervals: 1 - alpha coverage "
                   "(least-squares fits).", gt=0, lt=1)
_ALPHA = CONF_ALPHA.replace(default=None, optional=True, help="Confidence intervals of "
                            "1 - ALPHA coverage (default 0.05). Least squares only.")
_GROUPS = Param("groups", None, "Group labels of the rows (integers or strings), a variable "
                "of DATA, or two comma-separated (A,B: two-way), for --cov-type cluster; the "
                "panel of each row for --cov-type hac-panel.", type=str, optional=True,
                metavar="VAR")

_TIME = Param("time", None, "Time labels of the rows (integers or strings; sorted, they are "
              "the periods in order), a variable of DATA, for --cov-type hac-groupsum; with "
              "hac-panel, checked increasing within each panel.", type=str, optional=True,
              metavar="VAR")
_MAXLAGS = Param("maxlags", None, "Lags of the HAC covariances (HAC, hac-panel, "
                 "hac-groupsum): rows, or periods.", type=int, ge=0, optional=True,
                 metavar="L")
#: the weights of a HAC covariance's lags when none is named
HAC_KERNEL = "bartlett"
_KERNEL = Param("kernel", None, "Weights of the lags of a HAC covariance: Bartlett's "
                "1 - l/(L+1) (Newey-West, the default) or uniform.", type=str, optional=True,
                choices=("bartlett", "uniform"))
_USE_CORRECTION = Param("use_correction", None, "Small-sample factor of a HAC covariance "
                        "(default as statsmodels: none for HAC, n/(n-k) for hac-panel, the "
                        "cluster factor for hac-groupsum); hac-panel also takes 'hac' (the "
                        "switch alone) or 'cluster'.", type=bool, optional=True,
                        choices=("hac", "cluster"),
                        flag="--use-correction/--no-use-correction")


class _OneOf:
    """The condition of a :class:`Rule` that an option equals one of ``values`` (a rule
    compares an option's value with ``==``, which this answers)."""

    def __init__(self, *values):
        self.values = values

    def __eq__(self, other):
        return other in self.values

    __hash__ = None

    def __repr__(self):
        return " or ".join(map(str, self.values))


#: the covariances that read the rows' time labels, and their panel (or group) labels
_WITH_TIME = _OneOf("hac-groupsum", "hac-panel")
_WITH_GROUPS = _OneOf("cluster", "hac-panel")
#: the covariances that take lags
_WITH_LAGS = _OneOf("HAC", "hac-groupsum", "hac-panel")

#: --cov-type HAC and hac-groupsum need their lags, hac-groupsum its time labels
_HAC_RULES = [
    Rule("cov_type", "HAC", needs={"maxlags": Rule.GIVEN},
         message="--cov-type HAC needs the number of lags: --maxlags L"),
    Rule("cov_type", "hac-groupsum", needs={"maxlags": Rule.GIVEN, "time": Rule.GIVEN},
         message="--cov-type hac-groupsum needs the rows' time labels and the number of "
                 "lags: --time VAR --maxlags L"),
    Rule("cov_type", "hac-panel", needs={"maxlags": Rule.GIVEN, "groups": Rule.GIVEN},
         message="--cov-type hac-panel needs the rows' panel labels and the number of lags: "
                 "--groups VAR --maxlags L"),
    Rule("maxlags", needs={"cov_type": _WITH_LAGS},
         message="--maxlags L goes with --cov-type HAC, hac-groupsum or hac-panel"),
    Rule("kernel", needs={"cov_type": _WITH_LAGS},
         message="--kernel goes with --cov-type HAC, hac-groupsum or hac-panel"),
    Rule("time", needs={"cov_type": _WITH_TIME},
         message="--time VAR goes with --cov-type hac-groupsum or hac-panel"),
    Rule("cov_type", "hac-groupsum", excludes=("groups",),
         message="--time VAR (hac-groupsum) does not go with --groups VAR (cluster)"),
    Rule("use_correction", "hac", needs={"cov_type": "hac-panel"},
         message="--use-correction hac (use_correction='hac') goes with --cov-type "
                 "hac-panel; HAC and hac-groupsum take --use-correction alone or "
                 "--no-use-correction (True or False)"),
    Rule("use_correction", "cluster", needs={"cov_type": "hac-panel"},
         message="--use-correction cluster (use_correction='cluster') goes with --cov-type "
                 "hac-panel; HAC and hac-groupsum take --use-correction alone or "
                 "--no-use-correction (True or False)"),
    # a switch no covariance reads would be ignored without a word (False is "given" too)
    Rule("use_correction", True, needs={"cov_type": _WITH_LAGS},
         message="--use-correction goes with --cov-type HAC, hac-groupsum or hac-panel"),
    Rule("use_correction", False, needs={"cov_type": _WITH_LAGS},
         message="--no-use-correction goes with --cov-type HAC, hac-groupsum or hac-panel"),
]

#: --cov-type cluster and --groups go together
_CLUSTER_RULES = [
    Rule("cov_type", "cluster", needs={"groups": Rule.GIVEN},
         message="--cov-type cluster needs the rows' group labels: --groups VAR"),
    Rule("groups", needs={"cov_type": _WITH_GROUPS},
         message="--groups VAR goes with --cov-type cluster or hac-panel"),
]

#: every option of a fit of a recursion over one stream store (besides the store, the
#: method and the run's options)
FIT = Options(
    _GROUP, _X, _Y, _SAMPLE_DIM,
    Param("fit_intercept", None, "Fit an intercept, labelled 'intercept' (default: the "
          "method's).", type=bool, optional=True, flag="--intercept/--no-intercept"),
    Param("continue_from", None, "Continue the fit RESULT (of this method and options) on the "
          "rows appended to DATA since: start from its final state, read only the new rows; "
          "refused if the earlier rows changed.", type=object, optional=True,
          metavar="RESULT"),
    _ENGINE, _BLOCK_SIZE,
    Param("first_block_size", None, "Rows of the first block (default: --block-size).",
          type=int, gt=0, optional=True),
    _RECORD_EVERY,
    Param("epochs", 1, "Passes over the store (the state carries over from one to the next).",
          type=int, gt=0),
    Param("shuffle", False, "Visit chunks and the rows within each chunk in a seeded random "
          "order, new in every epoch.", type=bool),
    Param("seed", None, "Seed of --shuffle (default 0).", type=int, ge=0, optional=True),
    _DTYPE, _SEGMENT_BYTES,
    Param("weights", None, "Precision weights of the rows, a variable of DATA (as statsmodels' "
          "WLS: each row scaled by sqrt(w); 0 drops the row). Least squares only.", type=str,
          optional=True, metavar="VAR"),
    Param("missing", "raise", "A NaN in a selected variable (features, targets, weights, "
          "groups): refuse it, or drop its row. Least squares only.", type=str,
          choices=MISSING),
    _ALPHA,
    Param("cov_type", None, "Covariance of the coefficients (default nonrobust, from the final "
          "state); the others take one more pass over the rows. With --window, HC0 "
          "(RollingOLS' HCCM) and HAC are also each window's.", type=str, optional=True,
          choices=COV_TYPES),
    _GROUPS, _TIME, _MAXLAGS, _KERNEL, _USE_CORRECTION,
    Param("window", None, "Also fit every window of N rows (exact at each: QR factors merged, "
          "none downdated) and store the statistics of RollingOLS as rolling_* along "
          "'window'. Least squares only.", type=int, gt=0, optional=True, metavar="N"),
    Param("window_step", None, "With --window: record a window every N rows (default 1).",
          type=int, gt=0, optional=True, flag="--window-step", metavar="N"),
    Param("min_nobs", None, "With --window: the rows of positive weight a window needs "
          "(default: the number of coefficients).", type=int, gt=0, optional=True,
          metavar="N"),
    Param("expanding", False, "With --window: the first windows grow from --min-nobs rows "
          "until they hold N (RollingOLS(expanding=True)); a window of at least the rows "
          "fits every expanding window, the rows seen so far.", type=bool),
    Param("formula", None, "Build the features and targets from the columns of DATA by a "
          "formula ('y ~ a + C(k) + np.log(b) + a:k'; formulaic's syntax) instead of "
          "--x/--y; its intercept is the fit's.", type=str, optional=True, metavar="FORMULA"),
    rules=[*_CLUSTER_RULES, *_HAC_RULES,
           Rule("min_nobs", needs={"window": Rule.GIVEN},
                message="--min-nobs N goes with --window N"),
           Rule("window_step", needs={"window": Rule.GIVEN},
                message="--window-step N goes with --window N"),
           Rule("expanding", needs={"window": Rule.GIVEN},
                message="--expanding goes with --window N"),
           Rule("seed", needs={"shuffle": True},
                message="--seed goes with --shuffle (the seed of its random order)"),
           Rule("formula", excludes=("x", "y"),
                message="--formula names the features and the targets: leave out --x and "
                        "--y (x=, y=)")],
)

#: the options of a fit of several stores read together (one per input role of the
#: recursion): no per-store options
SEVERAL_STORES = FIT.without(
    "group", "x", "y", "sample_dim", "fit_intercept", "continue_from", "first_block_size",
    "epochs", "shuffle", "seed", "weights", "missing", "alpha", "cov_type", "groups", "time",
    "maxlags", "kernel", "use_correction", "window", "window_step", "min_nobs", "expanding",
    "formula")

#: the options of interleaved KF4LLS' own job besides those of a fit of several stores and
#: the recursion's parameters; its ``alpha`` (the recursion's mixing weight, given or
#: estimated) takes the place of the recursion's
INTERLEAVED = Options(
    Param("alpha", None, "Mixing weight in [0, 1]: the test population is alpha*A + "
          "(1-alpha)*B (or --estimate-alpha).", ge=0, le=1, optional=True),
    Param("test", None, "Test population C: records test_mse(step), and bias(step) if C has "
          "coef_true.", type=str, optional=True, metavar="C"),
    Param("estimate_alpha", None, "Estimate alpha from the column moments of A, B and --test C "
          "instead of giving --alpha.", type=str, choices=ALPHA_ESTIMATORS, optional=True),
    rules=[Rule("alpha", excludes=("estimate_alpha",), message=ALPHA_GIVEN_OR_ESTIMATED),
           Rule("alpha", None, needs={"estimate_alpha": Rule.GIVEN},
                message=ALPHA_GIVEN_OR_ESTIMATED),
           Rule("estimate_alpha", needs={"test": Rule.GIVEN},
                message="--estimate-alpha needs the test population (--test C): alpha is "
                        "estimated from the column moments of A, B and C")],
)

#: the options of a recursion's own job (a fit that is more than a fit of its rows), by
#: the recursion's name
JOB_OPTIONS = {"interleaved-kf4lls": INTERLEAVED}

#: the rules between a recursion's own parameters, by the recursion's name, in the command
#: line's words: checked with a fit's options, before any input is opened or any client
#: started (:func:`streamlsq.stream.fit.check_fit_options`, the command line's values); the
#: recursion checks the same when it is built, in Python's words, for whoever builds it
#: recursive residuals (``--diagnostics``) come from the QR form's factor
_DIAGNOSTICS_RULES = (
    Rule("diagnostics", True, needs={"solver": "qr"},
         message="--diagnostics goes with --solver qr (the recursive residuals come from "
                 "the QR form)"),
)

RECURSION_RULES = {
    "kf4lls": _DIAGNOSTICS_RULES,
    "rls": _DIAGNOSTICS_RULES,
    "lms": (
        Rule("tau", needs={"schedule": "inverse"},
             message="--tau goes with --schedule inverse (the tau of rate/(1 + k/tau))"),
        Rule("power", needs={"schedule": "power"},
             message="--power goes with --schedule power (the exponent of rate/k^power)"),
        Rule("schedule", "inverse", needs={"tau": Rule.GIVEN},
             message="--schedule inverse needs --tau T (the tau of rate/(1 + k/tau))"),
        Rule("schedule", "power", needs={"power": Rule.GIVEN},
             message="--schedule power needs --power A (the exponent of rate/k^power)"),
        Rule("eps", needs={"normalized": True},
             message="--eps goes with --normalized (the eps of normalised LMS's step "
                     "rho_k/(eps + |x~|^2))"),
    ),
}


def fit_options(params: Iterable[Param], *, several: bool = False,
                own: Options | None = None, rules: Iterable[Rule] = ()) -> Options:
    """The options of a fit of a recursion that declares ``params``: those of a fit of one
    store (:data:`FIT`; of several, :data:`SEVERAL_STORES`), then the recursion's
    parameters, then its own job's options (``own``). A later declaration of a name takes
    the place of an earlier one: that is where a recursion's parameter named as a fit's
    option (interleaved KF4LLS' mixing weight ``alpha``, not the statistics' ``alpha``)
    is settled. ``rules``: those between the recursion's parameters
    (:data:`RECURSION_RULES`)."""
    return Options(SEVERAL_STORES if several else FIT, *params, *([own] if own else []),
                   rules=rules)


#: applying a stream fit to new rows (:func:`streamlsq.predict_stream`)
PREDICT_STREAM = Options(
    _GROUP.replace(help="Group of the store holding the new rows."),
    _X.replace(help="The feature variables of the new rows (default: the fit's)."),
    _Y.replace(help="The target variables of the new rows, if any (default: the fit's)."),
    _SAMPLE_DIM.replace(help="The dimension of the new rows (default: the fit's)."),
    Param("step", None, "Apply the coefficients of this recorded step (default: the last).",
          type=int, gt=0, optional=True),
    Param("intervals", False, "A least-squares fit: also write mean_se, mean_ci_lower/upper "
          "and obs_ci_lower/upper (statsmodels' summary frame) beside yhat.", type=bool),
    _ALPHA.replace(help="With --intervals: intervals of 1 - ALPHA coverage (default: the "
                   "fit's)."),
    rules=[Rule("alpha", needs={"intervals": True},
                message="--alpha goes with --intervals (the level of their coverage)")],
)

#: a robust covariance of a least-squares fit (:func:`streamlsq.robust_covariance`)
ROBUST = Options(
    Param("cov_type", "HC1", "The robust covariance: HC0-HC3, cluster with --groups, HAC with "
          "--maxlags, hac-panel with --groups (the panels) and --maxlags, hac-groupsum with "
          "--time and --maxlags.", type=str, choices=COV_TYPES[1:]),
    _GROUPS, _TIME, _MAXLAGS, _KERNEL, _USE_CORRECTION,
    _ALPHA.replace(help="Confidence intervals of 1 - ALPHA coverage (default 0.05)."),
    rules=[*_CLUSTER_RULES, *_HAC_RULES],
)

def label_variables(cov_type: str | None, groups: str | None, time: str | None) -> str | None:
    """The variables of labels a covariance reads from the rows, comma-separated: the
    groups of ``cluster`` (one or two), the periods of ``hac-groupsum`` (``time``), the
    panels of ``hac-panel`` (``groups``) and, to check their order, their ``time``.

    Examples
    --------
    >>> from streamlsq.options.fit import label_variables
    >>> label_variables("hac-panel", "firm", "year"), label_variables("hac-groupsum", None, "year")
    ('firm,year', 'year')
    """
    if cov_type == "hac-panel":
        if groups is not None and "," in groups:
            raise InputError(f"--cov-type hac-panel takes one panel variable, got --groups "
                             f"{groups} (two-way panels are --cov-type cluster)")
        return groups if time is None else f"{groups},{time}"
    return groups if time is None else time


#: a table written as a stream store (:func:`streamlsq.convert`)
CONVERT = Options(
    Param("columns", None, "The columns to write, comma-separated (default: all).",
          type=object, optional=True, metavar="NAMES", parse=names),
    Param("chunk_rows", None, "Rows of a chunk of the store (default: those of the table's "
          "blocks, a Parquet row group).", type=int, gt=0, optional=True),
)
