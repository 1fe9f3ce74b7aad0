"""The stable Python API: triage a log you hold (bytes, a stream, a path) and get its report.

A program that triages many logs (a batch job, a Ray or Spark task, a service) builds one
`Triager`, which compiles the rule packs once, and calls it for each log. A Triager holds no
open file and leans on no process-wide state: it pickles with its compiled rules, so a
worker process, a Ray actor or a Spark executor gets a ready copy (the packs' files need not
exist there), and each process builds its own grammar and matcher on first use.

Versions: `API_VERSION` names this module's surface (its names and signatures are
snapshot-tested as a contract; a change that breaks a caller raises the major number), and
`SCHEMA_VERSION` the report's JSON (`report["schema_version"]`).

    from triage import Triager
    triager = Triager()                                # built-in rules; Triager(["my-rules/"]) adds packs
    report = triager.triage_bytes(data, "node1/vllm.log")
    report.outcome, [d.id for d in report.diagnoses]   # "failed", ["kv_cache_insufficient", ...]
    row = triager.record(data, "node1/vllm.log")       # the JSON dict; never raises for a bad log
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, BinaryIO, TextIO

from msgspec import Struct

from triage.errors import InputError, TriageError
from triage.model.report import SCHEMA_VERSION, Report, found_failure

__all__ = [
    "API_VERSION",
    "SCHEMA_VERSION",
    "InputError",
    "Report",
    "Summary",
    "TriageError",
    "Triager",
    "error_record",
    "found_failure",
    "summarize",
    "to_dict",
    "triage",
]

API_VERSION = "1.0"

Source = bytes | bytearray | memoryview | BinaryIO | TextIO
GiB = 1 << 30


class Triager:
    """Compiled rule packs and options, reused for every log it triages.

    `rules`: extra rule packs (files or folders) on top of the built-in ones; a broken pack
    raises `RulePackError` here, once, not per log. `redact`: secrets become `[REDACTED]`
    (the default; turn it off for local use only). `max_bytes`: a larger log is refused
    with `InputError` (`record` makes that an error row).
    """

    def __init__(
        self, rules: Iterable[str | os.PathLike[str]] = (), *, redact: bool = True, max_bytes: int | None = None
    ) -> None:
        from triage.pipeline import Options, load_rules

        self._packs = tuple(os.fspath(p) for p in rules)
        self._options = Options(redact=redact, extra_rules=list(self._packs), max_bytes=max_bytes)
        self._rules = load_rules(self._packs)

    @property
    def rules(self) -> tuple[str, ...]:
        """The extra packs given (the built-in ones are always in)."""
        return self._packs

    @property
    def redact(self) -> bool:
        return self._options.redact

    @property
    def max_bytes(self) -> int | None:
        return self._options.max_bytes

    def __repr__(self) -> str:
        return f"Triager(rules={list(self._packs)!r}, redact={self.redact}, max_bytes={self.max_bytes})"

    def __getstate__(self) -> dict[str, Any]:  # the compiled rules travel; nothing else is held
        return {"packs": self._packs, "redact": self.redact, "max_bytes": self.max_bytes, "rules": self._rules}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from triage.pipeline import Options

        self._packs = state["packs"]
        self._options = Options(redact=state["redact"], extra_rules=list(self._packs), max_bytes=state["max_bytes"])
        self._rules = state["rules"]

    def triage_stream(self, stream: BinaryIO | TextIO, name: str) -> Report:
        """Read a log from an open stream (bytes, or text: it is encoded as UTF-8) to its end.

        Raises `InputError` for input that is no log (binary, over `max_bytes`, a broken gzip)."""
        from triage.pipeline import run

        if isinstance(stream, io.TextIOBase) or (
            not isinstance(stream, (io.RawIOBase, io.BufferedIOBase)) and isinstance(stream.read(0), str)
        ):
            stream = io.BufferedReader(_Utf8Stream(stream))  # type: ignore[arg-type]
        return run(stream, name, self._options, self._rules)  # type: ignore[arg-type]

    def triage_bytes(self, data: bytes | bytearray | memoryview, name: str) -> Report:
        """A log held in memory (plain, gzip or UTF-16 bytes, as in a file)."""
        return self.triage_stream(io.BytesIO(data), name)

    def triage_path(self, path: str | os.PathLike[str], name: str | None = None) -> Report:
        """A log file (the report is named by the path as given unless `name` is).

        A FIFO or device is refused, and a file still growing is read as far as it was long."""
        from triage.ingest.read import open_source

        given = os.fspath(path)
        stream, _ = open_source(given, regular_only=True)
        with stream:
            return self.triage_stream(stream, name if name is not None else given)

    def record(self, source: Source, name: str) -> dict[str, Any]:
        """The report as a JSON dict, or `error_record` when the log cannot be triaged.

        Never raises for a bad log (what a batch needs: one bad file is one row); a bug is
        recorded as an internal error, with its type and message."""
        try:
            if isinstance(source, (bytes, bytearray, memoryview)):
                report = self.triage_bytes(source, name)
            else:
                report = self.triage_stream(source, name)
        except TriageError as exc:
            return error_record(name, str(exc), redact=self.redact)
        except Exception as exc:  # noqa: BLE001 - one bad log must not stop the many
            return error_record(name, f"internal error: {type(exc).__name__}: {exc}", redact=self.redact)
        return to_dict(report)

    def warm(self) -> None:
        """Build the grammar, the matcher and the validators now (a worker's first log would
        pay for them; a pool that forks after this shares them)."""
        self.record(_WARM_UP, "warm-up")


_WARM_UP = b"""INFO 10-02 16:20:11 [api_server.py:1896] vLLM API server version 0.10.2
INFO 10-02 16:20:11 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with config: model='m', dtype=auto
INFO 10-02 16:20:12 [gpu_model_runner.py:2392] Model loading took 14.2474 GiB and 4.102 seconds
INFO 10-02 16:20:13 [gpu_worker.py:298] Available KV cache memory: 53.11 GiB
ERROR 10-02 16:20:14 [core.py:586] EngineCore failed to start.
ERROR 10-02 16:20:14 [core.py:586] Traceback (most recent call last):
ERROR 10-02 16:20:14 [core.py:586]   File "/x/vllm/v1/engine/core.py", line 577, in run_engine_core
ERROR 10-02 16:20:14 [core.py:586] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 \
has a total capacity of 79.19 GiB of which 1.05 GiB is free.
"""


class _Utf8Stream(io.RawIOBase):
    """A text stream read as UTF-8 bytes, in pieces (the pipeline reads bytes)."""

    def __init__(self, text: TextIO) -> None:
        self._text, self._pending = text, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            piece = self._text.read(1 << 16)
            if not piece:
                return 0
            self._pending = piece.encode("utf-8", "surrogatepass")
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def to_dict(report: Report) -> dict[str, Any]:
    """The report as JSON types (what `--format json` prints, as a dict)."""
    return report.model_dump(mode="json")


def error_record(name: str, message: str, *, redact: bool = True) -> dict[str, Any]:
    """The record of a log that could not be triaged (`$defs/BatchError` of the schema);
    its name and message may quote a secret, so both are redacted unless `redact` is off."""
    from triage.diagnose.redaction import policy

    name, message = policy(redact).text(name), policy(redact).text(message)
    return {"input": {"name": name}, "error": message}


class Summary(Struct, frozen=True, kw_only=True):
    """What a cause table counts of one report: the outcome, the primary cause, and the
    model, vLLM version and GPU the log names (None where it does not)."""

    status: str  # failed, healthy, incomplete, recovered, or error (the log could not be read)
    cause: str | None = None
    model: str | None = None
    vllm_version: str | None = None
    gpu: str | None = None


def summarize(report: Report | dict[str, Any]) -> Summary:
    """A report's (or its JSON dict's, or an error record's) line in a cause table."""
    if isinstance(report, Report):
        outcome, facts, version = report.outcome, report.facts, report.vllm.version
        causes = [d.id for d in report.diagnoses]
    elif "error" in report and "outcome" not in report:
        return Summary(status="error")
    else:
        outcome, facts = report["outcome"], report.get("facts") or {}
        version = (report.get("vllm") or {}).get("version")
        causes = [d["id"] for d in report.get("diagnoses") or []]
    failed = outcome == "failed" or (outcome != "recovered" and bool(causes))
    return Summary(
        status="failed" if failed else outcome,
        cause=causes[0] if causes else None,
        model=_text(facts.get("model")),
        vllm_version=_version(version or facts.get("vllm_version")),
        gpu=_gpu(facts),
    )


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _version(value: Any) -> str | None:
    """A version as vLLM prints it (0.10.2, 0.11.1rc2.dev141+g38f2...): a banner's art is none."""
    text = _text(value)
    return text if text and text[0].isdigit() else None


def _gpu(facts: dict[str, Any]) -> str | None:
    """The GPU's name when the log prints it (nvidia-smi), else its memory, the next best tell."""
    if facts.get("gpu_name"):
        return str(facts["gpu_name"])
    total = facts.get("gpu_total_bytes")
    return f"{round(total / GiB)} GiB GPU" if isinstance(total, (int, float)) and total > 0 else None


@lru_cache(maxsize=8)
def _default(packs: tuple[str, ...], redact: bool, max_bytes: int | None) -> Triager:
    """One Triager per setting and process (built on first use, so a forked worker builds its own
    only if the parent had none)."""
    return Triager(packs, redact=redact, max_bytes=max_bytes)


def triage(
    source: Source | str | os.PathLike[str],
    name: str | None = None,
    *,
    rules: Iterable[str] = (),
    redact: bool = True,
    max_bytes: int | None = None,
) -> Report:
    """One log, for a script: bytes or a stream (`name` then names it), or a path.

    The Triager for these settings is built once per process and reused."""
    triager = _default(tuple(os.fspath(p) for p in rules), redact, max_bytes)
    if isinstance(source, (str, os.PathLike)):
        return triager.triage_path(source, name)
    if name is None:
        raise TypeError("triage(): give the log's name with bytes or a stream")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return triager.triage_bytes(source, name)
    return triager.triage_stream(source, name)
