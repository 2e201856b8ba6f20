"""``streamlsq demo``: the whole pipeline once, on small synthetic stores."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _client,
    _command_values,
    _friendly_errors,
    report_line,
)
from streamlsq.cli.options import click_options
from streamlsq.options.run import CLUSTER
from streamlsq.options.study import DEMO

__all__ = ["demo"]


@click.command(context_settings=CONTEXT)
@click_options(DEMO)
@click_options(CLUSTER)
@_friendly_errors
def demo(**given):
    """The whole pipeline: stream fits, meta-learning, prediction, with a summary and figures.

    Simulates a stream and fits it with KF4LLS (both engines), RLS and LMS;
    simulates a multi-task store, meta-learns the mixture and predicts new
    tasks; prints accuracy against the truth and rows/s, and writes
    summary.md, stream.png and metalearn.png into the demo folder.

    \b
    Examples:
      streamlsq demo
      streamlsq demo --out /tmp/demo --rows 500000 --tasks 10000
    """
    from streamlsq.studies.demo import DemoFolder, run_demo

    options, cluster = _command_values(DEMO, given)  # checked before a cluster starts
    o = DEMO.check(options)
    DemoFolder(o["out"]).check()  # a folder of the user's is refused before a cluster starts
    size = o["rows"] * (o["features"] + 1) * 8 + o["tasks"] * 80 * 9  # the stream, the tasks
    with _client(**cluster, data=size) as client:
        run_demo(client=client, echo=report_line, **o)
