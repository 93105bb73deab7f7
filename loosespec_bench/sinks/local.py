"""One folder per run: config.yaml, samples.jsonl (append + flush + fsync per sample),
summary.json (written atomically). Killing the process at any moment loses at most the
sample in progress; rerunning the same command resumes from what is on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator


class RunFolder:
    SAMPLES = "samples.jsonl"
    SUMMARY = "summary.json"
    CONFIG = "config.yaml"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._fh = None

    def write_config(self, yaml_text: str) -> None:
        self._atomic_write(self.CONFIG, yaml_text)

    def records(self) -> list[dict[str, Any]]:
        """Finished samples, first occurrence per id. A line cut short by a kill is skipped."""
        return list(self._iter_records())

    def _iter_records(self) -> Iterator[dict[str, Any]]:
        path = self.path / self.SAMPLES
        if not path.exists():
            return
        seen: set[str] = set()
        with path.open(encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # the process died mid-write: the sample is redone
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if rec["id"] not in seen:
                    seen.add(rec["id"])
                    yield rec

    def _repair_tail(self) -> None:
        """Drop a partial last line so the next append starts on a fresh line."""
        path = self.path / self.SAMPLES
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as f:
            data = f.read()
            if data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            f.truncate(cut)

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self._repair_tail()
            self._fh = (self.path / self.SAMPLES).open("a", encoding="utf-8")
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def write_summary(self, summary: dict[str, Any]) -> None:
        self._atomic_write(self.SUMMARY, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _atomic_write(self, name: str, text: str) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.path / name)
