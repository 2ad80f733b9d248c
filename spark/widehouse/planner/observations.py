"""Live traffic observations kept in the state directory, and their smoothing.

Each ``widehouse plan`` run on live stats records one observation per topic (more with
``--samples``) in ``<state>/planner/observations.json``; the traffic it plans from is, per topic,
the **median of the last N observations** (N = ``PlannerSettings.smoothing``) of the message rate
and of the byte rate. A median ignores a one-off spike or dip (it would otherwise move topics on
every replan) and follows a sustained change after about N/2 observations. A topic with fewer
observations uses those it has.

The file is read, updated and replaced atomically under an exclusive ``flock`` on a lock file
beside it, so concurrent runs never lose each other's observations. Observations older than
``max_age`` and topics without any left are pruned on every write.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from widehouse.errors import PlanError

FILE_NAME = "observations.json"
VERSION = 1
DEFAULT_KEEP = 16
DEFAULT_MAX_AGE = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Observation:
    at: float
    """Unix time of the sample."""
    msg_rate: float
    byte_rate: float


class ObservationStore:
    """Rate observations per topic in one JSON file (see the module docstring)."""

    def __init__(self, directory: Path, keep: int = DEFAULT_KEEP, max_age: float = DEFAULT_MAX_AGE) -> None:
        if keep < 1:
            raise PlanError(f"observation store: keep must be >= 1, got {keep}")
        self.path = directory / FILE_NAME
        self.keep = keep
        self.max_age = max_age

    def record(self, samples: Mapping[str, tuple[float, float]], at: float) -> None:
        """Add one observation (msg_rate, byte_rate) per topic taken at unix time ``at``."""
        with self._locked():
            data = self._read()
            for topic, (msg_rate, byte_rate) in samples.items():
                data.setdefault(topic, []).append([at, float(msg_rate), float(byte_rate)])
            horizon = at - self.max_age
            pruned: dict[str, list[list[float]]] = {}
            for topic in sorted(data):
                kept = sorted(o for o in data[topic] if o[0] >= horizon)[-self.keep :]
                if kept:
                    pruned[topic] = kept
            self._write(pruned)

    def history(self, topic: str) -> list[Observation]:
        """Observations of ``topic``, oldest first."""
        return [Observation(*o) for o in self._read().get(topic, [])]

    def smoothed(self, topics: Iterable[str], window: int) -> dict[str, tuple[float, float]]:
        """(msg_rate, byte_rate) per topic: medians of its last ``window`` observations.

        Topics never observed are left out.
        """
        data = self._read()
        out: dict[str, tuple[float, float]] = {}
        for topic in topics:
            recent = data.get(topic, [])[-window:]
            if recent:
                out[topic] = (
                    float(statistics.median(o[1] for o in recent)),
                    float(statistics.median(o[2] for o in recent)),
                )
        return out

    # -- file --------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with (self.path.parent / f"{FILE_NAME}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, list[list[float]]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise PlanError(f"cannot read observations {self.path}: {exc.strerror or exc}") from exc
        try:
            body: Any = json.loads(text)
            topics = body["topics"]
            if body.get("version") != VERSION or not isinstance(topics, dict):
                raise ValueError("unexpected layout")
            return {str(t): [[float(x) for x in o] for o in obs] for t, obs in topics.items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise PlanError(
                f"observations {self.path} are unreadable ({exc}); delete the file to start afresh"
            ) from exc

    def _write(self, data: dict[str, list[list[float]]]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"version": VERSION, "topics": data}, handle, separators=(",", ":"))
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
