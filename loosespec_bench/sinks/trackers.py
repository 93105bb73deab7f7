"""Optional experiment trackers (logger=wandb, ...) behind a guard that can never hurt a run.

A tracker mirrors what the run folder already holds (config, per-sample metrics, summary) to a
service such as Weights & Biases. The run folder is the record; the tracker is a convenience.
So every tracker call goes through SafeTracker: the first failure of any kind (package not
installed, invalid mode, no network, bad API key, an exception inside the library, a call
that hangs past SafeTracker.timeout_s) warns once,
names the tracker and the error, and turns the tracker off for the rest of the run. The
decoding loop, samples.jsonl and summary.json never see the error.

The interface a tracker implements (duck-typed; see sinks/wandb.py):
    start(cfg: DictConfig, run_dir: Path, run_id: str) -> None
    log_sample(record: dict) -> None               # one finished sample (samples.jsonl line)
    finish(summary: dict, records: list[dict]) -> None
    close() -> None                                # always called last (in a finally)

Wiring (app.run):
    tracker = build_tracker(cfg)                   # None for logger=none
    if tracker: tracker.start(cfg, folder.path, folder.path.name)
    ...  tracker.log_sample(rec) after folder.append(rec)
    ...  tracker.finish(summary, records) after folder.write_summary(summary)
    finally: tracker.close()
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

# logger=<name> options that mean "no tracker".
NO_TRACKER = (None, "none", "null", "")


# Seconds one tracker call may take before it is abandoned (the run goes on without the tracker).
# W&B's own init has its own, shorter, init_timeout; this bounds everything else (a log call
# blocked on a full queue, a finish() waiting for an unreachable server).
DEFAULT_TIMEOUT_S = 300.0


class TrackerWarning(UserWarning):
    """A tracker failed and was turned off; local results are unaffected."""


class TrackerTimeout(TimeoutError):
    """A tracker call did not return in time."""


class SafeTracker:
    """Wraps a tracker (or a factory that builds one) so that no call can raise.

    The first failure warns once (TrackerWarning) and disables the tracker: later calls are
    no-ops, and the wrapped tracker's close() is attempted silently so that a half-started
    service (a W&B run) is shut down. KeyboardInterrupt still propagates: the user asked to stop.
    """

    def __init__(
        self,
        tracker: Any = None,
        *,
        name: str = "tracker",
        factory: Callable[[], Any] | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.name = name
        self.timeout_s = timeout_s  # per call; None = wait for ever
        self.tracker: Any = None
        self.disabled = False
        self.error: BaseException | None = None  # the failure that disabled the tracker
        self._where = ""  # run id, once known: makes the warning name the run
        if factory is not None:
            self.tracker = self._guard("construction", factory)
        else:
            self.tracker = tracker
        if self.tracker is None and not self.disabled:
            self._fail("construction", ValueError("no tracker given"))

    @property
    def active(self) -> bool:
        return not self.disabled

    def start(self, cfg: DictConfig, run_dir: str | Path, run_id: str) -> None:
        self._where = f" for run {run_id}"
        self._call("start", cfg, Path(run_dir), run_id)

    def log_sample(self, record: dict[str, Any]) -> None:
        self._call("log_sample", record)

    def finish(self, summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
        self._call("finish", summary, records)

    def close(self) -> None:
        """Always safe; called from a finally block. Never warns twice."""
        if self.tracker is None:
            return
        if self.disabled:
            return  # already closed (quietly) when it failed
        self._call("close")
        self.tracker = None

    # -- guard ---------------------------------------------------------------------------
    def _call(self, method: str, *args: Any) -> Any:
        if self.disabled or self.tracker is None:
            return None
        return self._guard(method, lambda: getattr(self.tracker, method)(*args))

    def _guard(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return self._bounded(what, fn)
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # noqa: BLE001 (SystemExit from a library must not end the run either)
            self._fail(what, err)
            return None

    def _bounded(self, what: str, fn: Callable[[], Any]) -> Any:
        """fn() in a daemon thread, abandoned after timeout_s (a hung network call, a stuck
        service): TrackerTimeout, which turns the tracker off like any other failure."""
        if self.timeout_s is None:
            return fn()
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn()
            except BaseException as err:  # noqa: BLE001 (handed to the caller's guard)
                box["error"] = err

        thread = threading.Thread(target=target, name=f"{self.name}-tracker-{what}", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive():
            self._hung = True  # the abandoned call may still hold the tracker: close() is not attempted
            raise TrackerTimeout(f"no answer within {self.timeout_s:g} s; the call was abandoned")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _fail(self, what: str, err: BaseException) -> None:
        self.disabled = True
        self.error = err
        warnings.warn(
            f"{self.name} tracker failed in {what}{self._where} and is now off for this run "
            f"({type(err).__name__}: {err}); local results in the run folder are unaffected",
            TrackerWarning,
            stacklevel=5,  # the harness line that called the tracker
        )
        # Shut down whatever the tracker had started (e.g. a W&B run and its service process),
        # without a second warning: the first one already said what went wrong.
        tracker, self.tracker = self.tracker, None
        if tracker is not None and what != "close" and not getattr(self, "_hung", False):
            try:
                tracker.close()
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001
                pass


def build_tracker(cfg: DictConfig, **extra: Any) -> SafeTracker | None:
    """The configured tracker behind a SafeTracker, or None for logger=none (or no logger).

    `cfg.logger` is instantiated with hydra.utils.instantiate, minus its `name` key, inside the
    guard: a tracker whose class cannot be imported or built warns once and is returned disabled.
    `extra` adds constructor arguments (app.run hands W&B its `plotter`).
    """
    node = cfg.get("logger") if isinstance(cfg, DictConfig) else None
    if node is None:
        return None
    name = node.get("name")
    if name in NO_TRACKER or "_target_" not in node:
        return None

    def factory() -> Any:
        from hydra.utils import instantiate

        spec = OmegaConf.to_container(node, resolve=True)
        assert isinstance(spec, dict)
        spec.pop("name", None)
        return instantiate(spec, _convert_="all", **extra)

    return SafeTracker(name=str(name), factory=factory)
