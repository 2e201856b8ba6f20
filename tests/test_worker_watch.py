"""The judgement of "no live worker" (``streamlsq.no-workers-timeout``) as the watch's polls
see the scheduler's workers, with the polls' times given: a loaded machine polls late."""

from types import SimpleNamespace

from streamlsq.runtime.client import _PausedWatch

RUNNING = {"tcp://127.0.0.1:1": {"status": "running"}}


def _watch(no_workers=4.0):
    watch = _PausedWatch(SimpleNamespace(futures={}), timeout=0.0, poll=2.0,
                         no_workers=no_workers)
    watch._alive_at = 0.0
    return watch


def test_a_worker_running_from_the_start_is_alive_when_the_first_poll_comes_late():
    watch = _watch()
    assert not watch._no_live_worker(RUNNING, now=4.5)  # later than the timeout itself
    assert not watch._no_live_worker(RUNNING, now=7.0)  # seen for 2.5 s: stable, alive
    assert not watch._no_live_worker(RUNNING, now=30.0)


def test_no_worker_at_all_stops_after_the_timeout():
    watch = _watch()
    assert not watch._no_live_worker({}, now=3.9)
    assert watch._no_live_worker({}, now=4.0)


def test_workers_dying_as_they_start_stop_the_run_within_one_stable_time():
    watch = _watch()
    # a fresh worker at every poll, gone at the next one: never stable
    for i, now in enumerate((2.0, 4.0, 6.0)):
        workers = {f"tcp://127.0.0.1:{i}": {"status": "running"}}
        stopped = watch._no_live_worker(workers, now=now)
    assert stopped  # 6 s >= 4 s + 2 s of grace for the fresh one
    assert watch._gone == 2
