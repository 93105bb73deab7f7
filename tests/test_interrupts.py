"""loosespec_bench.interrupts: a stop a signal handler raised where Python drops it (a finalizer,
an `except Exception:`) is kept and raised at the next sample, so a Slurm point out of requeues
ends instead of finishing as if never stopped (issue 49's flaky requeue-limit fault)."""

from __future__ import annotations

import gc
import json
import signal
from pathlib import Path

import pytest

from loosespec_bench import interrupts
from loosespec_bench.run.app import Runner, run
from loosespec_bench.store.run_folder import RunFolder

from .conftest import compose_config


class Stop(Exception):
    """Stands for submitit's UncompletedJobError (an Exception: `except Exception` swallows it)."""


@pytest.fixture
def usr1():
    """SIGUSR1 handled by a handler that raises Stop, as submitit's USR2 handler raises when the
    job is out of requeues; the old handler and nothing pending afterwards."""
    def handler(signum, frame):
        raise Stop(f"signal {signum}: not requeued")

    old = signal.signal(signal.SIGUSR1, handler)
    interrupts.clear()
    yield handler
    signal.signal(signal.SIGUSR1, old)
    interrupts.clear()


class _RaisesInFinalizer:
    def __del__(self):
        signal.raise_signal(signal.SIGUSR1)  # the handler runs here, inside the finalizer


def _signal_where_python_drops_it(where: str) -> None:
    """SIGUSR1 delivered inside a finalizer or inside a library's broad `except Exception:`."""
    if where == "finalizer":
        obj = _RaisesInFinalizer()
        del obj
        gc.collect()
        return
    try:
        signal.raise_signal(signal.SIGUSR1)
    except Exception:  # a library's broad handler around the point where the signal lands
        pass


# A finalizer's exception is printed as "ignored" (pytest reports it as a warning): that is the loss.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("where", ["finalizer", "except Exception"])
def test_a_stop_raised_where_python_drops_it_is_lost_without_the_wrapper(usr1, where):
    _signal_where_python_drops_it(where)
    # No exception reached this frame: the stop is gone, and nothing remembered it.
    assert interrupts.pending() is None
    interrupts.raise_pending()  # nothing to raise


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("where", ["finalizer", "except Exception"])
def test_a_stop_raised_where_python_drops_it_is_kept_and_raised_at_the_next_boundary(usr1, where):
    assert interrupts.keep_what_handlers_raise([signal.SIGUSR1]) == [signal.SIGUSR1]
    _signal_where_python_drops_it(where)
    assert isinstance(interrupts.pending(), Stop)
    with pytest.raises(Stop, match="not requeued"):
        interrupts.raise_pending()
    interrupts.raise_pending()  # raised once: the next boundary has nothing left


def test_the_wrapper_still_raises_where_the_stop_is_not_swallowed_and_wraps_once(usr1):
    assert interrupts.keep_what_handlers_raise([signal.SIGUSR1]) == [signal.SIGUSR1]
    assert interrupts.keep_what_handlers_raise([signal.SIGUSR1]) == []  # already wrapped
    assert signal.getsignal(signal.SIGUSR1).wrapped is usr1
    with pytest.raises(Stop):
        signal.raise_signal(signal.SIGUSR1)
    # A handler that returns normally (submitit's bypass of SIGTERM) leaves nothing pending.
    old = signal.signal(signal.SIGUSR2, lambda signum, frame: None)
    try:
        assert interrupts.keep_what_handlers_raise([signal.SIGUSR2]) == [signal.SIGUSR2]
        signal.raise_signal(signal.SIGUSR2)
        assert interrupts.pending() is not None  # the Stop above, propagated: still remembered
        interrupts.clear()
        signal.raise_signal(signal.SIGUSR2)
        assert interrupts.pending() is None
    finally:
        signal.signal(signal.SIGUSR2, old)


def test_default_and_ignored_dispositions_are_left_alone():
    old = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        assert interrupts.keep_what_handlers_raise([signal.SIGUSR2]) == []
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, old)


def test_a_swallowed_stop_ends_the_run_at_the_next_sample_keeping_the_finished_ones(tmp_path, monkeypatch):
    """A stop swallowed during the second sample (remembered, as the wrapped handler does): the
    run raises it before the third sample, the two finished samples stay on disk, no summary is
    written (the point is not finished); the same command then resumes and finishes."""
    cfg = compose_config(["experiment=smoke_tiny", "warmup=false", "dataset.limit=4"], results_dir=tmp_path)
    real = Runner.run_sample
    calls: list[int] = []

    def run_sample(self, sample, index):
        rec = real(self, sample, index)
        calls.append(index)
        if len(calls) == 2:
            interrupts.remember(Stop("out of requeues"))  # what keep() does before a finalizer drops it
        return rec

    monkeypatch.setattr(Runner, "run_sample", run_sample)
    with pytest.raises(Stop, match="out of requeues"):
        run(cfg)
    assert len(calls) == 2
    folder = next(Path(tmp_path).glob("*/*/" + RunFolder.SAMPLES)).parent
    assert len((folder / RunFolder.SAMPLES).read_text().splitlines()) == 2
    assert not (folder / "summary.json").exists()

    monkeypatch.setattr(Runner, "run_sample", real)
    summary = run(cfg)
    ids = [json.loads(line)["id"] for line in (folder / RunFolder.SAMPLES).read_text().splitlines()]
    assert summary["n_samples"] == 4 and len(ids) == len(set(ids)) == 4


_BACKGROUND_CHILD = """
import signal, sys, time
from loosespec_bench.interrupts import ending_on_signals
def main(argv):
    print("ready", flush=True)
    time.sleep(60)
    return 0
sys.exit(ending_on_signals(main, [], "nothing to keep"))
"""


def test_ctrl_c_ends_a_command_started_with_sigint_ignored_as_a_background_shell_job_is():
    """`cmd &` in a non-interactive shell (CI's slurm tests) starts cmd with SIGINT ignored, and
    Python then installs no KeyboardInterrupt: ending_on_signals sets SIGINT itself, so the stop
    is still one line and exit 130 (the CI failure of session 34's plan-launch Ctrl-C test)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _BACKGROUND_CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip() == "stopped (SIGINT): nothing to keep", err


def test_plan_launch_handles_sigint_itself_and_its_drivers_get_the_default(monkeypatch, tmp_path):
    """plan launch (launch/driver.launch) installs its own SIGINT handler (not Python's default,
    absent when SIGINT was inherited ignored), so a driver it starts gets SIGINT at its default
    (handlers reset on exec)."""
    from loosespec_bench.launch import driver

    seen = {}

    def fake(sweeps, *, sequential, log_dir, live):
        seen["int"] = signal.getsignal(signal.SIGINT)
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "_launch", fake)
    monkeypatch.setattr(driver, "interrupt_launch", lambda sweeps, live: "interrupted: test")
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert driver.launch([], sequential=True, log_dir=tmp_path) == -1
        assert callable(seen["int"]) and seen["int"] not in (signal.SIG_IGN, signal.SIG_DFL, signal.default_int_handler)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # put back as it was
    finally:
        signal.signal(signal.SIGINT, before)


def test_stopping_on_signals_installs_over_the_starting_handlers_only_and_puts_them_back():
    """A run's SIGINT / SIGTERM stop (run/app.py) replaces the handlers a process starts with,
    SIG_IGN included (a background job's inherited SIGINT), but never a handler someone else
    installed (submitit's SIGTERM inside a Slurm job: it requeues the job); both come back."""
    def submitits(signum, frame):
        raise SystemExit(0)

    old_int, old_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, submitits)
        with interrupts.stopping_on_signals() as installed:
            assert installed == [signal.SIGINT]
            assert signal.getsignal(signal.SIGTERM) is submitits
            with pytest.raises(KeyboardInterrupt) as stop:
                signal.raise_signal(signal.SIGINT)
            assert stop.value.args == (signal.SIGINT,)
            assert interrupts.pending() is stop.value  # remembered, should something swallow it
            interrupts.clear()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is submitits
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
