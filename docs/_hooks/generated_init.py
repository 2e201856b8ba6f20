"""Griffe extension: document a generated ``__init__`` with its real signature.

The scikit-learn estimators (``streamlsq.estimators``) build their ``__init__``
when the class is created, from the parameters their recursion declares in the
registry: a generic ``__init__`` carrying them as its ``__signature__`` (scikit-learn
reads an estimator's parameters off that signature). Griffe reads the source, where no
such ``__init__`` exists, and would find the parameters of the class docstring nowhere.
For every class whose ``__init__`` was made at run time, this extension imports the
class and gives griffe's model of it an ``__init__`` with the same parameters and
defaults.

The recursions (``streamlsq.kernels.recursions``) take their declared parameters through
the base class's ``__init__(*args, **kwargs)``, and declare the constructor's signature
as the class's ``__signature__``: those classes get an ``__init__`` with it too.
"""

from __future__ import annotations

import importlib
import inspect

import griffe

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


class GeneratedInit(griffe.Extension):
    """Add the run-time ``__init__`` of classes whose constructor is generated."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        written = cls.members.get("__init__")
        if written is not None and not any(  # written in the source: griffe has it already
                p.kind in (griffe.ParameterKind.var_positional, griffe.ParameterKind.var_keyword)
                for p in written.parameters):
            return
        try:
            runtime = getattr(importlib.import_module(cls.module.path), cls.name)
        except (ImportError, AttributeError):
            return
        declared = vars(runtime).get("__signature__")
        init = vars(runtime).get("__init__")
        if declared is not None:  # a recursion: its declared parameters, and self
            signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                         *declared.parameters.values()]
        elif written is None and getattr(init, "__signature__", None) is not None:
            signature = list(init.__signature__.parameters.values())  # an estimator's
        else:  # not generated
            return
        parameters = griffe.Parameters(*(
            griffe.Parameter(
                p.name,
                kind=_KINDS[p.kind],
                annotation=None if p.annotation is inspect.Parameter.empty else p.annotation,
                default=None if p.default is inspect.Parameter.empty else repr(p.default),
            )
            for p in signature
        ))
        cls.set_member("__init__", griffe.Function("__init__", parameters=parameters,
                                                   parent=cls))
