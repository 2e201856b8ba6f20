"""What a stream fit read, as its result records it (``docs/stores.md#stream-fit-result``):
one record written by the result's layout and read back, with one set of defaults for
results of earlier layouts, wherever a result is used on rows again — applied to new rows
(``predict``), continued on rows appended since (``--continue-from``), and given its robust
covariance in one more pass (``robust_covariance``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from streamlsq.io.formulas import DesignRows, check_formula
from streamlsq.io.sources import StreamSource
from streamlsq.kernels.recursions.registry import RECURSIONS

__all__ = ["FitInputs"]


@dataclass(frozen=True)
class FitInputs:
    """The variables a stream fit read its features (``x_vars``) and targets (``y_vars``)
    from along ``sample_dim``, the formula that built them from the input's columns
    (``formula``, with the ``levels`` of its categorical columns and the ``contrasts`` of its
    factors), the variables of the rows' precision weights (``weights``) and group labels
    (``groups``), what a missing value did (``missing``), and whether the coefficients
    include an intercept (``intercept``: the constant column the reading path prepends, or
    the recursion's own constant term).

    The attributes a result keeps (:meth:`to_attrs`) have kept their names since the first
    layouts; :meth:`from_attrs` reads those of any layout.
    """

    x_vars: tuple[str, ...] = ("X",)
    y_vars: tuple[str, ...] = ("y",)
    sample_dim: str = "sample"
    intercept: bool = False
    missing: str = "raise"
    weights: str | None = None
    groups: str | None = None
    formula: str | None = None
    levels: dict = field(default_factory=dict)
    contrasts: dict = field(default_factory=dict)

    @classmethod
    def of(cls, source: StreamSource, intercept: bool) -> FitInputs:
        """What a fit of ``source`` reads; ``intercept``: whether its coefficients include
        one (:func:`~streamlsq.stream.layout.fits_intercept`)."""
        v = source.variables
        levels, contrasts = {}, {}
        if isinstance(source.rows, DesignRows):
            design = source.rows.design
            levels = {name: list(values) for name, values in design.levels}
            contrasts = dict(design.contrasts)
        return cls(tuple(v.x_vars), tuple(v.y_vars), v.sample_dim, bool(intercept), v.missing,
                   v.weights, v.groups, v.formula, levels, contrasts)

    def to_attrs(self) -> dict:
        """The result's attributes: ``x_variables`` and ``y_variables`` (JSON lists),
        ``sample_dim``, ``fit_intercept``, ``missing``, and when given ``weights_variable``,
        ``groups_variable`` and the formula's ``formula``, ``formula_levels`` and
        ``formula_contrasts`` (JSON)."""
        attrs = {"x_variables": json.dumps(list(self.x_vars)),
                 "y_variables": json.dumps(list(self.y_vars)),
                 "sample_dim": self.sample_dim,
                 "fit_intercept": bool(self.intercept),
                 "missing": self.missing}
        if self.weights is not None:
            attrs["weights_variable"] = self.weights
        if self.groups is not None:
            attrs["groups_variable"] = self.groups
        if self.formula is not None:  # the design, rebuilt from the result alone
            attrs.update({"formula": self.formula,
                          "formula_levels": json.dumps(self.levels),
                          "formula_contrasts": json.dumps(self.contrasts)})
        return attrs

    @classmethod
    def from_attrs(cls, attrs: dict) -> FitInputs:
        """What the fit whose result has the attributes ``attrs`` read. Results of earlier
        layouts leave out what they did not know: a plain stream store's ``X`` and ``y``
        along ``sample``, missing values refused, no weights, groups or formula, and no
        intercept but the recursion's own constant term, which was on unless its parameters
        turned it off (``intercept_kind="kernel"``: LMS)."""
        if "fit_intercept" in attrs:
            intercept = bool(attrs["fit_intercept"])
        else:
            method = RECURSIONS.get(str(attrs.get("method", "")))
            params = json.loads(attrs.get("parameters") or "{}")
            intercept = (method is not None and method.intercept_kind == "kernel"
                         and bool(params.get("intercept", True)))
        formula = attrs.get("formula") or None
        if formula is not None:  # data, never code: checked before it is used
            check_formula(formula)
        return cls(
            x_vars=tuple(json.loads(attrs.get("x_variables", '["X"]'))),
            y_vars=tuple(json.loads(attrs.get("y_variables", '["y"]'))),
            sample_dim=attrs.get("sample_dim") or "sample",
            intercept=intercept,
            missing=attrs.get("missing") or "raise",
            weights=attrs.get("weights_variable") or None,
            groups=attrs.get("groups_variable") or None,
            formula=formula,
            levels=json.loads(attrs.get("formula_levels") or "{}"),
            contrasts=json.loads(attrs.get("formula_contrasts") or "{}"),
        )

    def stream_options(self) -> dict:
        """The options of :func:`~streamlsq.io.sources.open_stream` that read rows as the fit
        read them: through its formula with its levels, or its variables."""
        options = {"sample_dim": self.sample_dim, "fit_intercept": self.intercept,
                   "weights": self.weights, "groups": self.groups, "missing": self.missing}
        if self.formula is not None:
            return {**options, "formula": self.formula, "levels": self.levels}
        return {**options, "x": list(self.x_vars), "y": list(self.y_vars)}
