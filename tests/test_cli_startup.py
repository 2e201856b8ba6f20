"""The command line starts without importing what it does not use (no timing here: what
is imported is checked; tests/benchmarks/bench_startup.py measures the seconds)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from streamlsq.cli.main import COMMANDS, load_command

HEAVY = ("sklearn", "scipy", "numba", "distributed", "xarray", "pandas", "dask")


def _imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    return set(run.stdout.strip().split("\n")[-1].split())


@pytest.mark.parametrize("command", ["--help", "info"])
def test_help_and_info_import_no_heavy_package(command, tmp_path):
    import zarr

    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=3)
    g.create_array("X", shape=(10, 2), dtype="float64", dimension_names=["sample", "feature"])
    g.create_array("y", shape=(10, 1), dtype="float64", dimension_names=["sample", "target"])
    args = ["--help"] if command == "--help" else ["info", str(store)]
    code = (f"import sys; sys.argv = ['streamlsq', *{args!r}]\n"
            "from streamlsq.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass")
    modules = _imported_after(code)
    assert not {m.split(".")[0] for m in modules} & set(HEAVY)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_short_help_is_the_commands_own(name):
    command = load_command(name)
    listed = click.Command(name, help=COMMANDS[name][2])
    assert listed.get_short_help_str(60) == command.get_short_help_str(60)


#: packages the fit of a least-squares recursion needs none of: SciPy's statistics (its
#: distributions come from scipy.special), scikit-learn, plotting, statsmodels
NOT_ON_FIT_PATH = ("scipy.stats", "sklearn", "matplotlib", "statsmodels")


def _imports_any_of(modules: set[str], names) -> set[str]:
    return {m for m in modules for name in names if m == name or m.startswith(name + ".")}


#: what the result's Dataset needs, imported beside the running fit (``imports_ahead``) or
#: when the result is built, never before the fit can send its first task
RESULT_ONLY = ("xarray", "pandas")


def test_the_fit_path_imports_no_scipy_stats_sklearn_or_matplotlib():
    modules = _imported_after("import streamlsq.stream.fit")
    assert not _imports_any_of(modules, NOT_ON_FIT_PATH)


def test_the_fit_path_and_the_fit_command_import_no_xarray_or_pandas():
    modules = _imported_after("import streamlsq.stream.fit, streamlsq.cli.fit, streamlsq.jobs")
    assert not _imports_any_of(modules, RESULT_ONLY)


def test_a_whole_fit_with_statistics_imports_no_scipy_stats(tmp_path):
    from streamlsq import simulate_stream

    store = tmp_path / "s.zarr"
    simulate_stream(store, n_rows=500, n_features=3, seed=0)
    out = tmp_path / "fit.zarr"
    args = ["fit", "kf4lls", str(store), "--out", str(out)]
    code = (f"import sys; sys.argv = ['streamlsq', *{args!r}]\n"
            "from streamlsq.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code")
    modules = _imported_after(code)
    assert (out / "pvalues").is_dir() and (out / "f_pvalue").is_dir()  # statistics written
    assert not _imports_any_of(modules, NOT_ON_FIT_PATH)


# -- a fit command is built, and its options checked, from the declarations alone ----------

#: the kernels' libraries: building ``fit NAME`` and checking its options import neither
KERNEL_LIBRARIES = ("numba", "scipy")


def _run_main(args: list[str]) -> tuple[str, str, set[str]]:
    """stdout, stderr and the imported modules of the command line's main run on ``args``
    in a new interpreter (``standalone_mode=False``: the exit code is printed)."""
    code = ("import sys\nfrom streamlsq.cli.main import main\ntry:\n"
            f"    main.main({args!r}, prog_name='streamlsq', standalone_mode=False)\n"
            "except SystemExit as exc:\n    print('exit', exc.code)\n"
            "print(' '.join(sorted(sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    *output, modules = run.stdout.strip().split("\n")
    return "\n".join(output), run.stderr, set(modules.split())


def _fit_help_commands() -> list[list[str]]:
    from streamlsq.kernels.recursions.registry import RECURSIONS

    return [["--help"], *(["fit", name, "--help"] for name in [*RECURSIONS, "interleaved"])]


@pytest.mark.parametrize("args", _fit_help_commands(), ids=" ".join)
def test_a_fit_commands_help_imports_no_kernel_library(args):
    output, _, modules = _run_main(args)
    name = args[1] if len(args) > 2 else None
    assert f"Usage: streamlsq fit {name} " in output if name else "Commands:" in output
    assert not _imports_any_of(modules, KERNEL_LIBRARIES)


def test_a_bad_option_value_is_refused_before_anything_runs(tmp_path):
    from streamlsq import simulate_stream

    store = simulate_stream(tmp_path / "s.zarr", n_rows=200, n_features=2, seed=0)
    out = tmp_path / "r.zarr"
    output, error, modules = _run_main(["fit", "kf4lls", str(store), "--out", str(out),
                                        "--forgetting", "2"])
    assert output == "exit 2"
    assert error.strip() == ("streamlsq: error: --forgetting: forgetting factor must be in "
                             "(0, 1], got 2.0")
    # refused before a kernel, the fit path or a cluster was imported, and nothing written
    assert not _imports_any_of(modules, (*KERNEL_LIBRARIES, *HEAVY))
    assert not out.exists()


@pytest.mark.parametrize("args", [["--help"], *([name, "--help"] for name in COMMANDS
                                               if name != "fit")], ids=" ".join)
def test_the_command_list_and_a_commands_help_import_no_numpy(args):
    """``streamlsq --help`` and a command's help are shown before numpy is imported (its
    import is most of their time); ``fit``'s help lists the recursions from their
    declarations, which import numpy."""
    output, _, modules = _run_main(args)
    assert "Usage: streamlsq" in output
    assert not _imports_any_of(modules, ["numpy"])


# -- the console script ends its process without the interpreter's teardown ---------------

def _console(args: list[str], before: str = "") -> subprocess.CompletedProcess:
    code = (f"{before}\nimport sys; sys.argv = ['streamlsq', *{args!r}]\n"
            "from streamlsq.cli.main import console\nconsole()\n"
            "print('console() returned')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


def test_the_console_script_runs_the_exit_handlers_and_flushes_its_output(tmp_path):
    """After a command succeeds, ``console()`` ends the process at once (``os._exit``): the
    exit handlers have run, and what the command printed into a pipe (block-buffered,
    lost by ``os._exit`` unless flushed) reaches it."""
    from streamlsq import simulate_stream

    store = simulate_stream(tmp_path / "s.zarr", n_rows=300, n_features=2, seed=0)
    marker = tmp_path / "exit-handler-ran"
    out = tmp_path / "r.zarr"
    run = _console(["fit", "kf4lls", str(store), "--out", str(out)],
                   before=f"import atexit; atexit.register(lambda: open({str(marker)!r}, "
                          "'w').write('ran'))")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"wrote {out}: kf4lls") and "console() returned" not in \
        run.stdout
    assert marker.read_text() == "ran"
    assert (out / "zarr.json").is_file() and not list(tmp_path.glob(".*partial*"))


def test_a_command_whose_output_is_closed_still_succeeds(tmp_path):
    """``streamlsq info STORE >&-``: Python starts with no ``sys.stdout``; the command's
    end has nothing of it to flush (it raised AttributeError, exit 1)."""
    import os

    from streamlsq import simulate_stream

    store = simulate_stream(tmp_path / "s.zarr", n_rows=300, n_features=2, seed=0)
    code = (f"import sys; sys.argv = ['streamlsq', 'info', {str(store)!r}]\n"
            "from streamlsq.cli.main import console\nconsole()")
    run = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, timeout=300,
                         preexec_fn=lambda: os.close(1))
    assert run.returncode == 0 and run.stderr == "", run.stderr


def test_a_failing_console_command_ends_through_the_interpreter(tmp_path):
    run = _console(["fit", "kf4lls", str(tmp_path / "none.zarr"), "--out",
                    str(tmp_path / "r.zarr")])
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("streamlsq: error: ")
    assert "none.zarr" in run.stderr and not (tmp_path / "r.zarr").exists()


def test_the_installed_command_is_the_console_script():
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "streamlsq"]
    assert script.value == "streamlsq.cli:console"
