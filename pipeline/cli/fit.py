"""``streamlsq fit``: a recursive estimator over stream stores, one subcommand per method."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _client, _friendly_errors, _scheduler_options
from streamlsq.errors import InputError

__all__ = [
    "fit",
    "fit_bfgs",
    "fit_interleaved_command",
    "fit_lms",
]


def _fit_options(*, engine: bool = True, first_block: bool = True):
    """The options every fit command shares, in --help order."""
    opts = [click.option("--out", required=True, type=click.Path(),
                         help="Result store to create.")]
    if engine:
        opts.append(click.option(
            "--engine", type=click.Choice(["sequential", "scan"]), default="sequential",
            show_default=True, help="In-order fold, or parallel sums + prefix scan."))
    opts.append(click.option(
        "--block-size", type=int, default=None,
        help="Rows per step (default: the store's block_size attribute or chunk size)."))
    if first_block:
        opts.append(click.option("--first-block-size", type=int, default=None,
                                 help="Rows of the first block (default: --block-size)."))
    opts += [
        click.option("--record-every", type=int, default=None,
                     help="Record coefficients every N steps (default: ~1000 steps in all)."),
        click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64",
                     show_default=True, help="Precision of the computation."),
        click.option("--checkpoint", type=click.Path(), default=None,
                     help="Folder for checkpoints (sequential engine)."),
        click.option("--resume", is_flag=True, help="Continue from --checkpoint."),
        click.option("--segment-size", type=float, default=None, metavar="MB",
                     help="MB of X per task (sequential default 256, scan default 96, at most an "
                     "sixteenth of the smallest worker memory limit)."),
        click.option("--overwrite", is_flag=True, help="Replace an existing result store."),
    ]

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


def _segment_bytes(segment_size):
    return int(segment_size * 2**20) if segment_size else None


def _summary(out, name, engine, ds) -> str:
    return (f"wrote {out}: {name} ({engine}) over {ds.attrs['n_rows']} rows in "
            f"{ds.attrs['n_blocks']} blocks, {ds.sizes['step']} recorded steps, "
            f"{ds.attrs['rows_per_second']:.3g} rows/s")


@click.group(context_settings=CONTEXT)
def fit():
    """Fit a recursive estimator to stream stores, block after block, in order.

    Each method is a subcommand with its own options: streamlsq fit METHOD --help.

    \b
    Methods:
      kf4lls       block least squares (Kalman filter); engines sequential and scan
      rls          RLS with a forgetting factor; engines sequential and scan
      lms          per-sample LMS (Widrow-Hoff), epochs and shuffles; sequential
      interleaved  interleaved KF4LLS over two populations A B; sequential and scan
      bfgs         incremental BFGS (exact, fixed or class-balanced rates); sequential
      irma         incremental risk minimisation on a basis of raw inputs x; sequential
      irma-gd      IRMA study's baseline: normalised GD with Tikhonov; sequential
      irma-rls     IRMA study's baseline: RLS with forgetting and Tikhonov; sequential

    \b
    Examples:
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq fit rls data.zarr --out rls.zarr --forgetting 0.999 --block-size 1 --ridge 1e-3
      streamlsq fit lms data.zarr --out lms.zarr --schedule inverse --rate 0.05 --tau 1e4
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --test p.zarr#c --out fit.zarr
      streamlsq fit bfgs data.zarr --out bfgs.zarr --block-size 1000 --rate exact
      streamlsq fit irma irma.zarr --out irma-fit.zarr --order 10 --domain 0 3
      streamlsq fit irma-rls irma.zarr --out rls-fit.zarr --basis monomial --forgetting 0.9
    """


def _least_squares_command(name: str, default_forgetting: str, doc: str):
    @click.argument("data", type=click.Path())
    @_fit_options()
    @click.option("--forgetting", type=float, default=None,
                  help=f"Forgetting factor g in (0, 1] (default {default_forgetting}).")
    @click.option("--ridge", type=float, default=0.0, show_default=True,
                  help="Ridge start H0 = ridge*I (Tikhonov term for rls).")
    @click.option("--group", default=None, help="Group of the store holding X and y.")
    @_scheduler_options
    @_friendly_errors
    def command(data, out, engine, block_size, first_block_size, record_every, dtype,
                checkpoint, resume, segment_size, overwrite, forgetting, ridge, group,
                scheduler, n_workers, memory_limit):
        from streamlsq.stream.fit import fit_stream

        params = {"ridge": ridge}
        if forgetting is not None:
            params["forgetting"] = forgetting
        with _client(scheduler, n_workers, memory_limit) as client:
            ds = fit_stream(
                data, name, out=out, group=group, engine=engine, block_size=block_size,
                first_block_size=first_block_size, record_every=record_every, dtype=dtype,
                client=client, checkpoint=checkpoint, resume=resume, overwrite=overwrite,
                segment_bytes=_segment_bytes(segment_size), **params,
            )
        click.echo(_summary(out, name, engine, ds))

    command.__doc__ = doc
    return fit.command(name, context_settings=CONTEXT)(command)


KF4LLS_HELP = """KF4LLS (block least squares) on the stream store DATA.

    \b
    Examples:
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq fit kf4lls data.zarr --out fit.zarr --engine scan --block-size 1000
      streamlsq fit kf4lls big.zarr --out fit.zarr --checkpoint ckpt/ --resume
    """
RLS_HELP = """RLS with a forgetting factor on the stream store DATA.

    With --block-size 1 this is per-sample RLS.

    \b
    Examples:
      streamlsq fit rls data.zarr --out rls.zarr --forgetting 0.999 --ridge 1e-3 --block-size 1
      streamlsq fit rls data.zarr --out rls.zarr --engine scan --block-size 1000
    """
fit_kf4lls = _least_squares_command("kf4lls", "1", KF4LLS_HELP)
fit_rls = _least_squares_command("rls", "0.99", RLS_HELP)


@fit.command("lms", context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@_fit_options(engine=False, first_block=False)
@click.option("--schedule", type=click.Choice(["constant", "inverse", "power"]),
              default="constant", show_default=True,
              help="Step size: rate; rate/(1 + k/tau); rate/k^power (k: samples so far).")
@click.option("--rate", type=float, default=0.01, show_default=True, help="rho_0 (> 0).")
@click.option("--tau", type=float, default=None, help="tau > 0 of the inverse schedule.")
@click.option("--power", type=float, default=None,
              help="Exponent in (0.5, 1] of the power schedule.")
@click.option("--normalized", is_flag=True,
              help="Normalised LMS: step rho_k/(eps + |x~|^2); stable for 0 < rate < 2.")
@click.option("--eps", type=float, default=1e-6, show_default=True,
              help="eps of normalised LMS.")
@click.option("--epochs", type=int, default=1, show_default=True,
              help="Passes over the store (the schedule continues across them).")
@click.option("--shuffle", is_flag=True,
              help="Visit chunks and the rows within each chunk in a seeded random order, "
                   "new in every epoch.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --shuffle.")
@click.option("--group", default=None, help="Group of the store holding X and y.")
@_scheduler_options
@_friendly_errors
def fit_lms(data, out, block_size, record_every, dtype, checkpoint, resume, segment_size,
            overwrite, schedule, rate, tau, power, normalized, eps, epochs, shuffle, seed, group,
            scheduler, n_workers, memory_limit):
    """LMS (Widrow-Hoff, per-sample SGD with an intercept) on the stream store DATA.

    Sequential engine only (LMS has no scan form). Blocks (--block-size) are the steps at
    which the coefficients may be recorded; the update is per sample. The coefficient
    rows of the result are labelled intercept, x0, x1, ...; steps count on over epochs
    and epoch(step) says which pass a step belongs to.

    \b
    Examples:
      streamlsq fit lms data.zarr --out lms.zarr --rate 0.001
      streamlsq fit lms data.zarr --out lms.zarr --schedule inverse --rate 0.05 --tau 1e4
      streamlsq fit lms data.zarr --out lms.zarr --normalized --rate 0.5 --epochs 3 --shuffle
      streamlsq fit lms data.zarr --out lms.zarr --schedule power --rate 0.1 --power 0.75
      streamlsq fit lms big.zarr --out lms.zarr --epochs 5 --checkpoint ckpt/ --resume
    """
    from streamlsq.stream.fit import fit_stream

    with _client(scheduler, n_workers, memory_limit) as client:
        ds = fit_stream(
            data, "lms", out=out, group=group, block_size=block_size,
            record_every=record_every, epochs=epochs, shuffle=shuffle, seed=seed, dtype=dtype,
            client=client, checkpoint=checkpoint, resume=resume, overwrite=overwrite,
            segment_bytes=_segment_bytes(segment_size), schedule=schedule, rate=rate,
            tau=tau, power=power, normalized=normalized, eps=eps,
        )
    click.echo(_summary(out, "lms", "sequential", ds) + f", {epochs} epoch(s)")


def _parse_rate(rate: str):
    """``--rate``: "exact" or a number (the kernel checks that it is positive)."""
    if rate.strip().lower() == "exact":
        return "exact"
    try:
        return float(rate)
    except ValueError:
        raise InputError(f"--rate must be 'exact' or a positive number, got {rate!r}") from None


@fit.command("bfgs", context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@_fit_options(engine=False)
@click.option("--rate", default="exact", show_default=True, metavar="exact|FLOAT",
              help="Step: exact line search on each block's loss, or a fixed rate alpha_r > 0.")
@click.option("--balanced", is_flag=True,
              help="Class-balanced per-example rates from --rate (binary targets 0/1 or -1/1).")
@click.option("--balance-counts", type=click.Choice(["block", "cumulative"]), default="block",
              show_default=True,
              help="Counts of positives/negatives for --balanced: the block's, or all so far.")
@click.option("--ridge", type=float, default=0.0, show_default=True,
              help="Start from H0 + ridge*I when the first block is rank deficient "
                   "(0: refuse such a block).")
@click.option("--group", default=None, help="Group of the store holding X and y.")
@_scheduler_options
@_friendly_errors
def fit_bfgs(data, out, block_size, first_block_size, record_every, dtype, checkpoint, resume,
             segment_size, overwrite, rate, balanced, balance_counts, ridge, group, scheduler,
             n_workers, memory_limit):
    """Incremental BFGS on the stream store DATA, block after block.

    The first block is solved by least squares (W0, B0 = H0^-1); every later block steps
    along B X'(Y - XW) and updates B by the BFGS formula, skipping the update when the
    curvature is not positive (counted: n_skipped(step) and the attr n_skipped). Several
    targets use the K x K form. Sequential engine only (BFGS has no scan form).

    \b
    Examples:
      streamlsq fit bfgs data.zarr --out bfgs.zarr --block-size 1000
      streamlsq fit bfgs data.zarr --out bfgs.zarr --block-size 500 --rate 0.5
      streamlsq fit bfgs labels.zarr --out b.zarr --block-size 200 --rate 1 --balanced
      streamlsq fit bfgs data.zarr --out bfgs.zarr --first-block-size 5 --ridge 1e-3
      streamlsq fit bfgs big.zarr --out bfgs.zarr --checkpoint ckpt/ --resume
    """
    from streamlsq.stream.fit import fit_stream

    with _client(scheduler, n_workers, memory_limit) as client:
        ds = fit_stream(
            data, "bfgs", out=out, group=group, block_size=block_size,
            first_block_size=first_block_size, record_every=record_every, dtype=dtype,
            client=client, checkpoint=checkpoint, resume=resume, overwrite=overwrite,
            segment_bytes=_segment_bytes(segment_size), rate=_parse_rate(rate),
            balanced=balanced, balance_counts=balance_counts, ridge=ridge,
        )
    line = _summary(out, "bfgs", "sequential", ds)
    line += f", {ds.attrs['n_skipped']} skipped B update(s)"
    if ds.attrs["ridge_used"]:
        line += f", ridge start H0 + {ridge:g}*I used"
    click.echo(line)


def _domain_option(domain):
    """``--domain A B`` given 0, 1 or d times: None, (a, b), or a box of d intervals."""
    if not domain:
        return None
    return tuple(domain[0]) if len(domain) == 1 else tuple(tuple(d) for d in domain)


def _basis_command(name: str, doc: str, options: list, summary_name: str):
    """A fit command of the IRMA family: basis options, then the method's own."""

    def command(data, out, block_size, record_every, dtype, checkpoint, resume, segment_size,
                overwrite, order, domain, basis, group, scheduler, n_workers, memory_limit,
                **params):
        from streamlsq.stream.fit import fit_stream

        with _client(scheduler, n_workers, memory_limit) as client:
            ds = fit_stream(
                data, name, out=out, group=group, block_size=block_size,
                record_every=record_every, dtype=dtype, client=client, checkpoint=checkpoint,
                resume=resume, overwrite=overwrite, segment_bytes=_segment_bytes(segment_size),
                order=order, domain=_domain_option(domain), basis=basis, **params,
            )
        click.echo(_summary(out, summary_name, "sequential", ds)
                   + f", final cumulative loss {ds.attrs['cumulative_loss']:.4g}")

    command.__doc__ = doc
    decorators = [
        click.argument("data", type=click.Path()),
        _fit_options(engine=False, first_block=False),
        click.option("--order", type=int, default=6, show_default=True,
                     help="Polynomial degree of the basis (per input dimension)."),
        click.option("--domain", type=float, nargs=2, multiple=True, metavar="A B",
                     help="Input interval [A, B]; repeat once per column of X for a box "
                          "(default: the store's domain attribute)."),
        click.option("--basis", type=click.Choice(["legendre", "monomial"]),
                     default="legendre", show_default=True,
                     help="Legendre polynomials orthonormal on the domain, or monomials."),
        *options,
        click.option("--group", default=None, help="Group of the store holding X and y."),
        _scheduler_options,
        _friendly_errors,
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return fit.command(name, context_settings=CONTEXT)(command)


IRMA_HELP = """IRMA (incremental risk minimisation) on the stream store DATA, one example at a time.

    theta += A^-1 phi(x) e / (lambda_t + phi' A^-1 phi), e = y - phi(x)' theta, with A the
    Gramian of the basis on the domain (A = I for Legendre). X holds the raw inputs x
    (one column per input dimension), y one target; the basis expands x per block and
    x outside the domain is refused. Blocks (--block-size) are the steps at which theta
    and cumulative_loss(step) (sum of the squared errors before each update) are
    recorded. Coefficient rows are the basis functions; the attr basis rebuilds the
    basis (streamlsq.kernels.make_basis). Sequential engine only.

    \b
    Examples:
      streamlsq simulate irma --out irma.zarr --rows 150
      streamlsq fit irma irma.zarr --out fit.zarr --order 10 --domain 0 3
      streamlsq fit irma irma.zarr --out fit.zarr --stiffness additive --stiffness-rate 0.1
      streamlsq fit irma box.zarr --out fit.zarr --order 3 --domain 0 1 --domain -1 1
    """
IRMA_GD_HELP = """The IRMA study's GD baseline on DATA: normalised gradient descent, Tikhonov mu.

    Per example one gradient step on (y - phi' theta)^2 + mu theta' theta with the
    exactly minimising rate. Store, blocks and results as for streamlsq fit irma (the
    paper runs its baselines on --basis monomial). Sequential engine only.

    \b
    Examples:
      streamlsq fit irma-gd irma.zarr --out gd.zarr --order 6 --domain 0 3 --mu 0.05
      streamlsq fit irma-gd irma.zarr --out gd.zarr --basis monomial --mu 0
    """
IRMA_RLS_HELP = """The IRMA study's RLS baseline on DATA: forgetting factor, Tikhonov mu.

    theta_t minimises sum g^(t-i) (y_i - phi_i' theta)^2 + g^t theta' theta / p0
    + mu theta' theta. Store, blocks and results as for streamlsq fit irma (the paper:
    --basis monomial --forgetting 0.9 --mu 0.05 --p0 1). Sequential engine only.

    \b
    Examples:
      streamlsq fit irma-rls irma.zarr --out rls.zarr --order 6 --domain 0 3
      streamlsq fit irma-rls irma.zarr --out rls.zarr --forgetting 0.99 --mu 0 --p0 100
    """
_MU = click.option("--mu", type=float, default=0.05, show_default=True,
                   help="Tikhonov weight mu >= 0 (the paper's 0.05).")
fit_irma = _basis_command("irma", IRMA_HELP, [
    click.option("--stiffness", type=click.Choice(["multiplicative", "additive", "constant"]),
                 default="multiplicative", show_default=True,
                 help="lambda_t = initial*rate^t, initial + rate*t, or initial."),
    click.option("--stiffness-initial", type=float, default=0.1, show_default=True,
                 help="lambda_0 > 0 (the paper's 0.1)."),
    click.option("--stiffness-rate", type=float, default=1.05, show_default=True,
                 help="rate of the schedule (the paper's 1.05; ignored by constant)."),
], "irma")
fit_irma_gd = _basis_command("irma-gd", IRMA_GD_HELP, [_MU], "irma-gd")
fit_irma_rls = _basis_command("irma-rls", IRMA_RLS_HELP, [
    click.option("--forgetting", type=float, default=0.9, show_default=True,
                 help="Forgetting factor g in (0, 1] (the paper's 0.9)."),
    _MU,
    click.option("--p0", type=float, default=1.0, show_default=True,
                 help="Initial covariance P0 = p0*I, p0 > 0 (the paper's identity)."),
], "irma-rls")


@fit.command("interleaved", context_settings=CONTEXT)
@click.argument("a", type=click.Path(), metavar="A")
@click.argument("b", type=click.Path(), metavar="B")
@_fit_options(first_block=False)
@click.option("--alpha", type=float, default=None,
              help="Mixing weight in [0, 1]: the test population is alpha*A + (1-alpha)*B.")
@click.option("--estimate-alpha", type=click.Choice(["means", "grid"]), default=None,
              help="Estimate alpha from the column moments of A, B and --test C instead.")
@click.option("--test", "test", type=click.Path(), default=None, metavar="C",
              help="Test population: records test_mse(step), and bias(step) if C has "
                   "coef_true.")
@click.option("--start", type=click.Choice(["a", "b"]), default="a", show_default=True,
              help="Population of the first block.")
@click.option("--ridge", type=float, default=0.0, show_default=True,
              help="Ridge start H0 = ridge*I (0: the paper's H0 = 0).")
@_scheduler_options
@_friendly_errors
def fit_interleaved_command(a, b, out, engine, block_size, record_every, dtype, checkpoint,
                            resume, segment_size, overwrite, alpha, estimate_alpha, test, start,
                            ridge, scheduler, n_workers, memory_limit):
    """Interleaved KF4LLS: blocks of populations A and B alternately, centred and weighted.

    A, B (and C) are stream stores or groups of one, written PATH#GROUP. Blocks: each
    store's block_size attribute (else its chunk size), or --block-size for all. The
    stream alternates A1, B1, A2, B2, ... (--start b: B1, A1, ...) and stops when the
    population due next has no block left: the longer population's extra blocks are not
    used (the result's attrs blocks_used_a/b and rows_unused_a/b say how many). Give
    --alpha, or --estimate-alpha with --test.

    \b
    Examples:
      streamlsq simulate interleaved --out p.zarr
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --out fit.zarr
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --test p.zarr#c --out fit.zarr
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --start b --out fit.zarr
      streamlsq fit interleaved b.zarr f.zarr --test p.zarr --estimate-alpha grid --out r.zarr
    """
    from streamlsq.stream.interleaved import fit_interleaved

    with _client(scheduler, n_workers, memory_limit) as client:
        ds = fit_interleaved(
            a, b, alpha=alpha, estimate_alpha=estimate_alpha, test=test, start=start,
            ridge=ridge, out=out, engine=engine, block_size=block_size,
            record_every=record_every, dtype=dtype, client=client, checkpoint=checkpoint,
            resume=resume, overwrite=overwrite, segment_bytes=_segment_bytes(segment_size),
        )
    line = _summary(out, "interleaved", engine, ds) + f", alpha {ds.attrs['alpha']:.4g}"
    if "test_mse" in ds:
        line += f", final test MSE {float(ds.test_mse[-1]):.4g}"
    click.echo(line)


