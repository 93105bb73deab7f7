"""`run(cfg) -> summary`: the whole experiment for one resolved config.

Kept free of Hydra's decorator so tests (and notebooks) call it with a composed config.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
import sys
import traceback
import zlib
from pathlib import Path
from typing import Any, Callable

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from ..store.baselines import BaselineStore, timed_indices
from ..build import build_engine, build_task, check_artefacts
from ..settings.checks import precheck_config
from ..settings.run_settings import RunSettings
from ..engines.base import Engine
from .. import interrupts
from ..omp import busy_line
from ..errors import ConfigError
from ..generation import GenerationOutput, merge_turns
from ..measure.metrics import sample_metrics
from ..settings.config import baseline_config, class_or_none, data_source, target_alone
from .end_table import format_summary
from ..tasks.prompting import chat_template_kwargs, cut_at_stop, encode_messages, encode_prompt, sample_hash
from .resume import check_topup_machine, reusable_records, sample_groups, timing_topup, topped_up_from
from ..measure.serving import batch_repeats
from ..store.run_folder import (
    DISK_ERRNOS, FolderLocked, RunFolder, check_files, count_finished_lines, run_dir, summary_json, write_error,
)
from ..sinks.trackers import build_tracker
from ..store.summary import RUN_PROVENANCE, build_summary, data_files, run_metadata
from ..tasks import Sample, Task
from ..calibrate import find_calibration
from ..measure.work import merge_work
from ..measure.timing import (
    CLEAN, EXCLUDED, RETIMED, UNTIMED, Clocks, Probe, differ, process_tree_cpu,
)

log = logging.getLogger(__name__)


class Runner:
    """The run protocol for one config over a loaded engine, one sample at a time: prompts
    encoded with the engine's tokenizer, the paired baseline in alternating order, multi-turn
    conversations, records and scores. Knows the Engine interface only (engines/base.py)."""

    def __init__(self, cfg: DictConfig, task: Task, engine: Engine, settings: RunSettings | None = None) -> None:
        self.cfg = cfg
        self.task = task
        self.engine = engine
        # The run's own settings, typed (settings/run_settings.py): the pre-check's, or read
        # here (a script's runner), never as raw keys.
        self.settings = settings = settings or RunSettings.read(cfg)
        self.max_new = settings.generation.max_new_tokens or task.max_new_tokens
        # Tests inject fake clocks (timing.py). An engine whose models run in child processes
        # (vLLM) is timed by the CPU of the whole process tree, not of this process alone.
        self.clocks = Clocks(cpu=process_tree_cpu) if getattr(engine, "out_of_process", False) else Clocks()
        self.tolerance, self.max_retimes = settings.timing.tolerance, settings.timing.max_retimes
        self.retime = settings.timing.retime_on((cfg.get("pair") or {}).get("device"))
        # Throughput mode: batches of batch_size through the engine's prefetch (vLLM: at every size).
        self.batched = engine.batch_size > 1 or engine.serves_batches
        # Our loop's batches (engine=hf, batch_size > 1): rows share every forward, so a sample
        # has no time of its own; its records are quality-only (UNTIMED, HFEngine.check).
        self.untimed_batches = self.batched and not engine.serves_batches
        self.side_limit = settings.timing.side_limit
        # A target-alone side beside the method: paired (every sample) or shared (the store's,
        # re-run beside the method on the timing subset). method=ar is the target alone itself.
        self.paired = settings.root.baseline in ("paired", "shared") and not target_alone(cfg)
        self.store: BaselineStore | None = None  # baseline=shared: run() opens it
        self.timed: set[int] | None = None  # baseline=shared: the timing subset's sample positions
        self.run_name = ""

    def encode(self, sample: Sample) -> tuple[str, list[int]]:
        """A sample's first-turn prompt text and ids, as the engine's target reads them."""
        return encode_prompt(self.engine.tokenizer, sample, self.settings.root.chat_template, chat_template_kwargs(self.cfg))

    def check_lengths(self, samples: list[Sample]) -> None:
        """A prompt that, with max_new_tokens, does not fit the target's context is a
        ConfigError naming the sample, before any generation (the model would otherwise fail or
        silently run past its trained positions)."""
        ctx = self.engine.context_length
        if ctx is None:
            return
        if self.max_new >= ctx:
            raise ConfigError(
                f"generation.max_new_tokens={self.max_new} does not fit the target's context of {ctx} tokens "
                "(max_position_embeddings); lower it"
            )
        chat = self.settings.root.chat_template
        for sample in samples:
            n = len(encode_prompt(self.engine.tokenizer, sample, chat)[1])
            if n + self.max_new > ctx:
                raise ConfigError(
                    f"sample {sample.id}: its prompt ({n} tokens) + max_new_tokens ({self.max_new}) exceeds the target's "
                    f"context of {ctx} tokens (max_position_embeddings); lower generation.max_new_tokens, "
                    "shorten the prompt (e.g. dataset.num_fewshot) or use a longer-context model"
                )

    def warmup(self, sample: Sample) -> None:
        """Untimed short runs of both contestants on a sample's prompt (Engine.warmup)."""
        self.engine.warmup(self.encode(sample)[1])

    def _decode(self, gen: GenerationOutput) -> str:
        text = self.engine.tokenizer.decode(gen.new_tokens, skip_special_tokens=True)
        return cut_at_stop(text, self.task.stop_strings)

    def _side(self, turns: list[tuple[GenerationOutput, int, str]], sample: Sample) -> dict[str, Any]:
        """One contestant's record part from its (output, prompt length, text) per turn:
        metrics summed over turns, the score over all turns' answers."""
        gen = turns[0][0] if len(turns) == 1 else merge_turns([g for g, _, _ in turns])
        if len(turns) > 1 and all(g.work for g, _, _ in turns):
            gen.work = merge_work([g.work for g, _, _ in turns])
        side = {
            "output_text": turns[-1][2],
            "output_ids": gen.new_tokens,
            "metrics": sample_metrics(gen, sum(n for _, n, _ in turns)),
            "score": self.task.score_turns(sample, [t for _, _, t in turns]),
        }
        if len(turns) > 1:
            side["turns"] = [{"output_text": t, "metrics": sample_metrics(g, n)} for g, n, t in turns]
        return side

    def seed(self, sample: Sample) -> int:
        """The sample's generation seed (its first turn's; turn t uses seed + t)."""
        return (self.settings.root.seed * 1_000_003 + zlib.crc32(sample.id.encode())) % 2**63

    def check_batch(self, samples: list[Sample]) -> None:
        """engine.batch_size > 1 batches first turns only: multi-turn samples are refused."""
        if self.engine.batch_size > 1 and any(s.followups for s in samples):
            raise ConfigError(
                f"engine.batch_size={self.engine.batch_size} batches single-turn prompts; {self.task.name} has "
                "multi-turn samples: use engine.batch_size=1"
            )

    def runs_baseline(self, sample: Sample, index: int) -> bool:
        """Whether the target alone runs beside the method on this sample: paired, or under
        baseline=shared where the store lacks the sample or the sample is in the timing subset."""
        if not self.paired:
            return False
        if self.store is None or self.timed is None or index in self.timed:
            return True
        return self.store.get(sample.id, sample_hash(sample)) is None

    def prefetch(self, samples: list[Sample], chunk: int, repeats: int = 1, indices: list[int] | None = None,
                 on_ready: Callable[[int], None] | None = None) -> None:
        """Throughput mode: the chunk's prompts go to the engine as one batch, per contestant
        (the order alternates between chunks and repeats, as between samples at batch 1);
        run_sample then reads the outputs. Each output's time is its batch's wall time / the
        batch size. repeats > 1: the batch runs again, interleaved the same way, for timing.
        The target alone runs only on the samples it runs on one at a time (runs_baseline;
        indices: the samples' positions in the run, for baseline=shared's timing subset).

        Our untimed loop (untimed_batches) runs the target alone's batch first and calls
        on_ready(j) inside the method's batch as soon as sample j has every side it needs, so
        the app writes finished records while the chunk's other rows decode: an interruption
        loses at most the rows still running and the chunk's target-alone outputs, not the
        chunk (nothing is timed, so neither the order nor the writes inside a batch cost a figure)."""
        requests = [(list(self.encode(s)[1]), self.seed(s)) for s in samples]
        where = indices if indices is not None else list(range(len(samples)))
        base_pos = [j for j, (s, i) in enumerate(zip(samples, where)) if self.runs_baseline(s, i)]
        baseline = [requests[j] for j in base_pos]
        stream = on_ready is not None and self.untimed_batches
        awaits = set(base_pos)
        pending = {j: (2 if j in awaits else 1) for j in range(len(samples))}  # sides each sample awaits

        def ready(j: int) -> None:
            pending[j] -= 1
            if pending[j] == 0 and on_ready is not None:
                on_ready(j)

        for r in range(repeats):
            order = (False, True) if stream else (True, False) if (chunk + r) % 2 == 0 else (False, True)
            for method in order if self.paired else (True,):
                if not method and not baseline:
                    continue
                # The machine's load over the batch, recorded beside its times (the per-sample
                # probes in run_sample time only the read of a prefetched output).
                probe = Probe(self.clocks)
                probe.start()
                # request i of this side's batch -> sample base_pos[i] (target alone) or i (method)
                side_ready = None if not stream else ready if method else (lambda i: ready(base_pos[i]))
                outs = self.engine.prefetch(requests if method else baseline, method=method, max_new_tokens=self.max_new,
                                            repeat=r, on_ready=side_ready)
                probe.stop()
                load = probe.record()
                for gen in outs or []:
                    if gen.serving is not None:
                        gen.serving.setdefault("load", []).append({k: load.get(k) for k in ("others_share", "loadavg", "cpu_share")})

    def run_sample(self, sample: Sample, index: int) -> dict[str, Any]:
        text, ids = self.encode(sample)
        seed = self.seed(sample)
        prompt_sha = sample_hash(sample)
        stored = self.store.get(sample.id, prompt_sha) if self.paired and self.store is not None else None
        # baseline=shared: the target alone runs beside the method on the timing subset, and
        # wherever the store lacks the sample (it has to run once anyway; it is timed for free).
        timed = self.paired and (stored is None or self.timed is None or index in self.timed)
        # Alternate which contestant runs first so slow drift of the machine cancels out.
        order = (True, False) if index % 2 == 0 else (False, True)
        contestants = order if timed else (True,)
        # Re-timing (timing.py): both sides again while their machine conditions differ. The
        # contaminated attempts' times stay in the record (what the speedup would have read).
        history: list[dict[str, Any]] = []
        while True:
            turns, probes = self._contest(sample, ids, contestants, seed)
            sides = {method: probe.record() for method, probe in probes.items()}
            # A batched engine's sides were timed as whole batches (prefetch, with their load):
            # re-timing one sample alone would time another batch size.
            retime = timed and self.retime and not self.batched
            reasons = differ(sides[True], sides[False], self.tolerance, self.side_limit) if retime else []
            if reasons:
                history.append({"reasons": reasons, "method_wall_s": sides[True]["wall_s"], "baseline_wall_s": sides[False]["wall_s"]})
            if not reasons or len(history) > self.max_retimes:
                break
            log.warning("sample %s: timing contaminated (%s); re-timing both sides", sample.id, "; ".join(reasons))
        if reasons:
            log.warning("sample %s: still contaminated after %d re-timing(s) (%s); left out of the speed figures",
                        sample.id, self.max_retimes, "; ".join(reasons))
        verdict = EXCLUDED if reasons else RETIMED if history else CLEAN if timed or not self.paired else UNTIMED
        if self.untimed_batches:
            verdict = UNTIMED  # decoded in our loop's batch: no time of its own (quality only)
        rec = {
            "id": sample.id,
            "prompt_sha256": prompt_sha,  # resume reuses the record only for this prompt
            "meta": sample.meta,
            "reference": sample.reference,
            "prompt_text": text,
            "prompt_ids": ids,
            **self._side(turns[True], sample),
        }
        fresh = self._side(turns[False], sample) if timed else None
        if self.paired:
            # Quality is judged against one target alone per sample: the store's wherever it has
            # the sample, timed or not. A fresh run timed beside the method is kept for speed
            # (`baseline_timed`, stats.speed_baseline); on another CPU than the store's its bf16
            # tokens can differ, and judging the timed samples against it mixed two baselines in
            # one run (MGSM: the target alone 0/30 in the store, 2/30 in topped-up runs).
            rec["baseline"] = fresh if stored is None else BaselineStore.side_of(stored)
            if fresh is not None and stored is not None:
                rec["baseline_timed"] = fresh
        if self.store is not None and self.paired:
            rec["baseline_source"] = self._store_baseline(sample, prompt_sha, stored, fresh, sides.get(False))
        rec["timing"] = {
            "status": verdict,
            "attempts": len(history) + (0 if reasons else 1),
            "contaminated_attempts": history,
            "tolerance": self.tolerance,
            "rule": "applied" if self.retime else "recorded only (timing.retime)",
            "method": sides[True],
            **({"baseline": sides[False]} if timed else {}),
            **({"batch_size": self.engine.batch_size} if self.untimed_batches else {}),
        }
        steps = [
            {**step, "turn": t} if sample.followups else step
            for t, (gen, _, _) in enumerate(turns[True])
            for step in gen.step_records
        ]
        if steps:
            rec["steps"] = steps
        return rec

    def _store_baseline(self, sample: Sample, prompt_sha: str, stored: dict[str, Any] | None,
                        fresh: dict[str, Any] | None, timing: dict[str, Any] | None) -> dict[str, Any]:
        """rec["baseline_source"] under baseline=shared: where the record's target alone came
        from. A fresh run the store lacks is written there; one it has is compared with it."""
        assert self.store is not None
        out: dict[str, Any] = {"store": self.store.path.name, "timed": fresh is not None}
        if stored is None:
            assert fresh is not None
            self.store.put(sample.id, prompt_sha, fresh, computed_by=self.run_name, timing=timing)
            out["origin"] = "computed here"
        else:
            out["origin"] = f"reused from {stored.get('computed_by') or 'the store'}"
            if fresh is not None:
                # Greedy and deterministic: a difference is bf16 nondeterminism or a changed
                # engine; the summary counts it (the record keeps its own, fresh, baseline).
                out["matches_store"] = fresh["output_ids"] == stored.get("output_ids")
        return out

    def _contest(
        self, sample: Sample, ids: list[int], contestants: tuple[bool, ...], seed: int
    ) -> tuple[dict[bool, list[tuple[GenerationOutput, int, str]]], dict[bool, Probe]]:
        """Every contestant's turns of one sample, each generation timed by its side's probe."""
        chat = self.settings.root.chat_template
        probes = {method: Probe(self.clocks) for method in contestants}
        # Multi-turn samples: each contestant's conversation goes on with its own answers.
        convs = {method: list(sample.messages) for method in contestants}
        turns: dict[bool, list[tuple[GenerationOutput, int, str]]] = {method: [] for method in contestants}
        for t, user in enumerate([None, *sample.followups]):
            for method in contestants:
                if user is None:
                    turn_ids = ids
                else:
                    convs[method] += [{"role": "assistant", "content": turns[method][-1][2]}, {"role": "user", "content": user}]
                    turn_ids = encode_messages(self.engine.tokenizer, convs[method], chat, chat_template_kwargs(self.cfg))[1]
                # Timed here, around the Engine interface: every engine gets the same rule.
                probes[method].start()
                gen = self.engine.generate(list(turn_ids), method=method, seed=seed + t, max_new_tokens=self.max_new)
                probes[method].stop()
                turns[method].append((gen, len(turn_ids), self._decode(gen)))
        return turns, probes


def same_figures(stored: dict[str, Any], recomputed: dict[str, Any]) -> bool:
    """Whether a recomputed summary says what the stored one says, apart from provenance (when,
    where, at which commit) and the record of a recomputation. Both are compared as they read
    back from summary.json, so a tuple and a list, or a NaN and its null, count as the same."""

    def figures(summary: dict[str, Any]) -> dict[str, Any]:
        text = json.loads(summary_json(summary))
        return {k: v for k, v in text.items() if k not in RUN_PROVENANCE and k != "summary_recomputed"}

    return figures(stored) == figures(recomputed)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run (or resume) one experiment point; returns and saves its summary.

    The run holds its folder's lock from before it reads what is on disk until the summary is
    written: a second run of the same point (or a re-score of the folder) fails at once with
    FolderLocked instead of computing every sample twice or losing appended ones.
    """
    # Every setting (the engine's own check included) and what this machine must provide,
    # before anything loads.
    settings = precheck_config(cfg)  # the run's settings, typed (RunSettings)
    check_artefacts(cfg)  # trained files the rule reads (AutoJudge's judge), per run point
    if settings.root.threads:
        torch.set_num_threads(settings.root.threads)
    # The task and its samples load before the folder exists: a rejected config or bad data
    # (ConfigError) leaves no result folder behind.
    task = build_task(cfg)
    print(f"[loosespec_bench] data: {data_source(task.data_dir)}", flush=True)
    samples = task.samples()
    task.preflight()  # e.g. the sandbox runs an empty program under the run's settings
    path = run_dir(cfg)
    existed = path.exists()
    if existed:
        check_files(path)  # a folder from elsewhere: links or FIFOs in place of its files are refused, nothing read
    folder = RunFolder(path)
    interrupts.clear()  # a stop remembered for an earlier run in this process is not this run's
    folder.lock("run")  # before the model loads: a duplicate stops at once
    tracker = None
    engine: Engine | None = None
    try:
        folder.clear_error()  # this attempt replaces the last one's verdict
        done = reusable_records(folder, samples)
        todo = [(i, s) for i, s in enumerate(samples) if s.id not in done]
        topup = timing_topup(settings, target_alone(cfg), samples, done, sample_groups(task, samples))
        check_topup_machine(folder.path, topup)  # before the config is rewritten: a refusal changes nothing
        folder.write_config(OmegaConf.to_yaml(cfg, resolve=True))
        print(
            f"[loosespec_bench] {cfg.method.name} on {task.name}: {len(samples)} samples "
            f"(dataset.limit={cfg.dataset.get('limit')}), {len(samples) - len(todo)} already done"
            + (f", {len(topup)} of them re-run timed (timing.subset={'null' if settings.timing.subset is None else settings.timing.subset} tops up the timing subset)" if topup else "")
            + f" -> {folder.path}",
            flush=True,
        )
        todo = sorted(todo + topup, key=lambda item: item[0])
        tracker = build_tracker(cfg, **tracker_extras(cfg))  # None for logger=none; a SafeTracker never raises
        if tracker:
            tracker.start(cfg, folder.path, folder.path.name)
        if todo:
            engine = build_engine(cfg, task)  # the models load here
            runner = Runner(cfg, task, engine, settings)
            runner.run_name = f"{settings.root.experiment_name}/{folder.path.name}"
            if settings.root.baseline == "shared" and runner.paired:
                runner.store = BaselineStore(settings.paths.baselines_root, baseline_config(cfg), f"{cfg.pair.name}_{task.name}").open()
                subset = settings.timing.subset
                runner.timed = timed_indices(len(samples), None if subset is None else int(subset), sample_groups(task, samples))
            runner.check_lengths([s for _, s in todo])  # before any generation
            runner.check_batch([s for _, s in todo])
            # The busy-machine note (omp.busy_line) only once the run has passed every check and
            # decodes: a refused command stays one error line, however loaded the machine.
            if line := busy_line():
                print(f"[loosespec_bench] {line}", file=sys.stderr, flush=True)
            if settings.root.warmup:
                runner.warmup(todo[0][1])
            bar = tqdm(total=len(todo), desc=f"{cfg.method.name}/{task.name}", unit="sample", disable=not settings.root.progress)
            batch = engine.batch_size
            repeats = batch_repeats(len(todo), batch, engine.timed_batches)
            # Problems per prefetch: a batch (vLLM), or several for our loop, which refills
            # finished rows from them (Engine.prefetch_batches).
            chunk = batch * (engine.prefetch_batches if runner.untimed_batches else 1)
            written = 0  # todo[:written] are on disk, in todo's order
            finished: set[int] = set()  # positions in todo whose outputs are all ready (our untimed loop)

            def record(pos: int) -> None:
                index, sample = todo[pos]
                interrupts.raise_pending()  # a cluster's stop that something swallowed ends the run here
                rec = runner.run_sample(sample, index)
                rec["run_id"] = folder.path.name  # whose record it is: resume refuses another run's (reusable_records)
                if sample.id in done:  # a timing top-up: the timed record replaces the untimed one
                    rec["timing"]["topped_up_from"] = topped_up_from(done[sample.id], rec)
                    folder.replace_record(rec)
                else:
                    folder.append(rec)  # on disk first: a tracker failure can never lose it
                    if tracker:
                        tracker.log_sample(rec)  # (a top-up's sample was logged when it first ran)
                done[rec["id"]] = rec
                bar.update(1)
                bar.set_postfix(tau=f"{rec['metrics']['tau']:.2f}")

            def write_ready(start: int) -> Callable[[int], None]:
                """on_ready for the chunk from todo[start]: write every finished record that has
                no unfinished one before it (rows finish out of order; the file keeps todo's)."""
                def ready(j: int) -> None:
                    nonlocal written
                    finished.add(start + j)
                    while written in finished:
                        record(written)
                        written += 1
                return ready

            while written < len(todo):
                pos = written
                if runner.batched and pos % chunk == 0:  # throughput mode: the next chunk at once
                    part = todo[pos : pos + chunk]
                    runner.prefetch([s for _, s in part], pos // chunk, repeats, [i for i, _ in part], on_ready=write_ready(pos))
                    if written > pos:
                        continue  # written inside the batch (all of it, or up to a row the loop still owes)
                record(pos)
                written += 1
            bar.close()

        interrupts.raise_pending()  # ... and never lets the point write its summary as if finished
        records = [done[s.id] for s in samples if s.id in done]
        cal, cal_source = run_calibration(settings, cfg.pair)
        summary = build_summary(
            task, records, seed=settings.root.seed, power_threshold=settings.root.power_threshold,
            timing_tolerance=settings.timing.tolerance, calibration=cal, calibration_source=cal_source,
        )
        summary.update(run_metadata(cfg, task.name, folder.path))
        previous = folder.read_summary() if not todo else None
        if previous:
            # Nothing ran: the summary is only recomputed. The run's provenance (when and at which
            # commit its samples were produced) stays the run's; the recomputation is recorded apart.
            summary["summary_recomputed"] = {k: summary.get(k) for k in RUN_PROVENANCE}
            summary.update({k: previous[k] for k in RUN_PROVENANCE if k in previous})
        summary["selection"] = task.selection(samples)
        summary["data_files"] = data_files(task)
        if not (previous and same_figures(previous, summary)):
            # A re-pass whose figures come out as stored leaves the file as it was: a campaign that
            # walks over finished points rewrites none of them (and commits no churn).
            folder.write_summary(summary)
    except BaseException as err:
        if tracker:
            tracker.close()  # the tracker's run is marked failed; finished samples are on disk
        if isinstance(err, (ConfigError, KeyboardInterrupt)) and not existed:
            folder.close()
            remove_if_empty(folder.path)  # a rejected config (or a run stopped before its first sample) leaves no result folder
        if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
            # A disk that filled (or went read-only) mid-run: what is on disk is every finished
            # sample (each appended and fsynced), so the same command resumes; say that in one line.
            folder.close()
            kept = len(folder.records())
            raise DiskError(
                f"cannot write {err.filename or folder.path} ({os.strerror(err.errno)}); the {kept} finished sample(s) "
                f"are kept in {folder.path}: free space there (or choose paths.results_dir elsewhere) and rerun the "
                "same command to resume"
            ) from None
        raise
    finally:
        if engine is not None:
            engine.close()
        folder.close()  # releases the lock
    if tracker:
        tracker.finish(summary, records)
        tracker.close()
    print(format_summary(summary), flush=True)
    return summary


def run_calibration(settings: RunSettings, pair: Any) -> tuple[Any, str]:
    """The stored cost-model calibration for this run's pair, machine and threads
    (calibrate.find_calibration), or (None, why)."""
    if not str((pair or {}).get("device", "cpu")).startswith("cpu"):
        return None, "calibrations are measured on the CPU only (calibrate.py)"
    return find_calibration(settings.paths.results_dir, pair, settings.root.threads or None)


class DiskError(ConfigError):
    """The results folder's disk failed a write mid-run (DISK_ERRNOS); finished samples are kept."""


def run_recording_errors(cfg: DictConfig, *, record_config_errors: bool = False) -> dict[str, Any]:
    """run(cfg), leaving the traceback in the point's folder (error.txt) when it fails.

    Only errors (Exception) are recorded: SystemExit / KeyboardInterrupt are how submitit
    requeues a pre-empted or timed-out job and how a user stops a run; those points resume.
    SIGINT (Ctrl-C) and SIGTERM (a plain `kill`) stop the run through its cleanup and end it
    with one line on stderr naming what is kept and exit 128 + the signal (SystemExit), where
    the process has no handler of its own for them (interrupts.stopping_on_signals: submitit's,
    inside a Slurm job, is left to requeue the job).
    A refused start (FolderLocked: another process writes the folder) records nothing, since
    the folder belongs to that process; nor does a ConfigError unless record_config_errors
    (sweep points): a rejected single run leaves no folder. The exception is re-raised, so Hydra marks the job
    failed and the other sweep points go on.
    """
    try:
        folder: Path | None = run_dir(cfg)
    except Exception:  # a config that cannot even name its folder: its error goes to Hydra's job dir
        folder = None
    try:
        with interrupts.stopping_on_signals():
            return run(cfg)
    except KeyboardInterrupt as err:
        interrupts.clear()  # this stop is handled here: a later run in this process is not stopped by it
        signum = err.args[0] if err.args and isinstance(err.args[0], int) else signal.SIGINT
        print(stopped_line(signum, folder), file=sys.stderr, flush=True)
        raise SystemExit(128 + int(signum)) from None
    except FolderLocked:
        raise
    except ConfigError:
        # A rejected config or bad data: a single run says so in one line and leaves no folder;
        # a sweep point (record_config_errors) records it, so that the sweep's failed points
        # stay listed (status, plan launch) after the sweep goes on.
        if record_config_errors:
            write_error(folder or _hydra_job_dir() or Path.cwd(), traceback.format_exc())
        raise
    except Exception:
        write_error(folder or _hydra_job_dir() or Path.cwd(), traceback.format_exc())
        raise


def stopped_line(signum: int, folder: Path | None) -> str:
    """The one line a stopped run ends with: what survived and how to go on. Finished lines
    are counted without parsing (a record cut off by the stop is not one: resume redoes it)."""
    name = signal.Signals(signum).name
    if folder is None or not folder.is_dir():
        return f"stopped ({name}): no sample had finished, no run folder is kept; rerun the same command to start again"
    kept = count_finished_lines(folder / RunFolder.SAMPLES)
    return (f"stopped ({name}): the {kept} finished sample record(s) are kept in {folder}; "
            "rerun the same command to resume from them")


def _tracker_plots(*args: Any) -> dict[str, Path]:
    from ..report.plots import tracker_plots  # pandas + matplotlib: only when a tracker plots

    return tracker_plots(*args)


def tracker_extras(cfg: DictConfig) -> dict[str, Any]:
    """What the configured tracker gets besides its own config node: the plot maker, for a
    tracker class whose constructor declares a `plotter` parameter (W&B's)."""
    target = (cfg.get("logger") or {}).get("_target_")
    if not target:
        return {}
    cls = class_or_none(target)
    if cls is None:  # build_tracker warns about a tracker it cannot build; no extras then
        return {}
    return {"plotter": _tracker_plots} if "plotter" in inspect.signature(cls).parameters else {}


def remove_if_empty(path: Path) -> None:
    """Remove a new run folder that holds no result (only its lock file and config.yaml: a run
    refused before its first sample), and its experiment folder when that is left empty."""
    try:
        if any(p.name not in (RunFolder.LOCK, RunFolder.CONFIG) for p in path.iterdir()):
            return
        for name in (RunFolder.CONFIG, RunFolder.LOCK):
            (path / name).unlink(missing_ok=True)
        path.rmdir()
        path.parent.rmdir()  # the experiment folder, only if empty
    except OSError:
        pass


def _hydra_job_dir() -> Path | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:
        return None
