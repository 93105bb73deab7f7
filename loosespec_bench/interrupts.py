"""A stop that a signal handler raises is never lost.

On a cluster, the job's signal handlers end a point: submitit's USR2 handler raises
UncompletedJobError when the job is out of requeues (or SystemExit after it requeued the job).
Python runs a handler between two bytecodes of the main thread, wherever that thread happens to
be; when that is inside a finalizer (`__del__`, a weakref callback), a logging handler's emit or
any library's `except Exception:`, the exception is printed as "ignored" or swallowed, and the run
goes on as if the stop had never come: the point then finishes (or hits the time limit) and the
driver cannot say why (issue 49's flaky requeue-limit fault test).

`keep_what_handlers_raise` wraps the installed handlers so that what they raise is also
remembered here; the decoding loop calls `raise_pending` at each sample boundary (and before the
summary), which raises a remembered stop that was swallowed. A stop that propagated normally
ends the run before the next boundary, so nothing is raised twice.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Iterable, Iterator

_pending: BaseException | None = None


def remember(err: BaseException) -> None:
    """Keep `err` until raise_pending raises it (or clear drops it). Signal-safe: one assignment."""
    global _pending
    _pending = err


def clear() -> None:
    """Drop a remembered stop (a new run starts; the stop was handled)."""
    global _pending
    _pending = None


def pending() -> BaseException | None:
    return _pending


def raise_pending() -> None:
    """Raise the stop a signal handler raised and something swallowed; nothing when none."""
    global _pending
    err, _pending = _pending, None
    if err is not None:
        raise err


def _keeping(handler: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
    def keep(signum: int, frame: FrameType | None) -> Any:
        try:
            return handler(signum, frame)
        except BaseException as err:
            remember(err)
            raise

    keep.keeps_what_it_raises = True  # type: ignore[attr-defined]
    keep.wrapped = handler  # type: ignore[attr-defined]
    return keep


def keep_what_handlers_raise(signals: Iterable[int]) -> list[int]:
    """Wrap the Python handlers installed for `signals` (submitit's, inside a Slurm job) so that
    an exception one raises is remembered; SIG_DFL / SIG_IGN and already wrapped ones are left
    as they are. Returns the signals wrapped. Call it from the main thread."""
    wrapped = []
    for sig in signals:
        handler = signal.getsignal(sig)
        if not callable(handler) or getattr(handler, "keeps_what_it_raises", False):
            continue
        signal.signal(sig, _keeping(handler))
        wrapped.append(sig)
    return wrapped


def ending_on_signals(main: Callable[[Any], int], argv: Any, what: str) -> int:
    """main(argv), where SIGINT (Ctrl-C) and SIGTERM end with one line on stderr naming `what`
    survives the stop (exit 128 + the signal), never a traceback: the command-line tools that
    write files (report, calibrate) share this one ending."""
    import sys

    def _stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signum)

    # SIGINT explicitly: started in the background by a non-interactive shell (`cmd &`) a process
    # inherits SIGINT ignored, and Python then raises no KeyboardInterrupt for it.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        return main(argv)
    except KeyboardInterrupt as err:
        signum = err.args[0] if err.args and isinstance(err.args[0], int) else signal.SIGINT
        print(f"stopped ({signal.Signals(signum).name}): {what}", file=sys.stderr)
        return 128 + int(signum)


def _stop_here(signum: int, frame: FrameType | None) -> None:
    err = KeyboardInterrupt(signum)
    remember(err)  # raised again at the next sample boundary if something swallows it
    raise err


# The handlers a process starts with: the interpreter's own for SIGINT, the default action or
# SIG_IGN (inherited: a non-interactive shell's `cmd &` starts a job with SIGINT ignored), or
# None (set outside Python). Any other callable is someone's: submitit's, inside a Slurm job.
_STARTING_HANDLERS = (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None)


@contextmanager
def stopping_on_signals(signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[list[int]]:
    """Within the block, each of `signals` raises KeyboardInterrupt(signum) (and is remembered,
    as keep_what_handlers_raise does), so that a run stopped by Ctrl-C or a plain `kill` unwinds
    through its own cleanup (the lock released, the tracker closed) and can say what it kept.

    Installed only over the handlers a process starts with (_STARTING_HANDLERS); a handler
    someone else installed (submitit's SIGTERM inside a Slurm job, which requeues the job) is
    left as it is. Nothing is installed outside the main thread (Python allows none there).
    On leaving, the handlers found are put back. Yields the signals it installed."""
    import threading

    found: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in signals:
            old = signal.getsignal(sig)
            if old in _STARTING_HANDLERS:
                signal.signal(sig, _stop_here)
                found[sig] = old
    try:
        yield list(found)
    finally:
        for sig, old in found.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)
