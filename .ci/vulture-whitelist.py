"""Names vulture cannot see used: public API used by users and tests, protocols that
Python, scikit-learn, click, doctest and IPython call, dataclass fields read by callers.
A name is listed only with the reason it is used (.ci/run runs vulture with this file)."""
# ruff: noqa
# module __dir__ (PEP 562) and the signature inspect and help() read
__dir__
_.__signature__
_.__test__  # doctest: keeps a class's docstring out of the doctests
# public API of the kernels and the pipeline (tests, docs, notebooks, users)
_.to_monomial
_.n_nodes_used
_.registered
interleaved_figure1
load_command  # the command line's lazy loader, also checked by tests/test_cli_startup.py
_.format_commands  # click calls it for --help
_._repr_markdown_  # IPython shows a study's summary with it
_.unraisablehook  # sys calls it for an exception it cannot raise (the CLI's quiet exit)
# scikit-learn's estimator protocol and fitted attributes
_.multi_output
_.single_output
_.allow_nan
_.sparse
_.positive_only  # the target tag GLMRegressor sets for counts and amounts
_.partial_fit
_.coef_
_.intercept_
_.n_skipped_
_.ridge_used_
_.cov_params_  # the least-squares estimators' statistics, statsmodels' names
_.bse_  # GLMRegressor's fitted statistics, statsmodels' names
_.deviance_
_.scale_
_.converged_
_.n_iter_
_.from_rows  # RegressionFactor of rows in memory: the tests' and users' reference
# dataclass fields read by callers
df_num  # WaldTest: statsmodels' name of the F test's numerator degrees of freedom
expected_bias
predictions
column_labels
