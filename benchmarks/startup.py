"""Where one run on a small log spends its time, phase by phase, in a fresh interpreter.

    .../bin/python benchmarks/startup.py LOG     # prints one JSON object of milliseconds

Run by bench.py with the interpreter of the install it measures (caches warm). Phases
follow the pipeline: `import` (the modules the CLI loads for `--format json`), `rules`
(the compiled packs, from the cache), `scan` (chunk search; builds the matcher), `parse`
(lines to events; loads the grammar), `diagnose` (timeline, rules, report, redaction) and
`render` (JSON). Lines are redacted as the pipeline does it (each line whole, as read).
The scan is run to completion before the parse, so the parse sees every line of the join
windows (the pipeline closes a window early): a small overcount. The process's teardown,
which the CLI skips, is not counted.
"""

from __future__ import annotations

import gc
import json
import sys
import time

T0 = time.perf_counter()
gc.set_threshold(100_000, 20, 20)  # as the CLI's entry point sets it (triage/apps/cli.py: entry)


def main(path: str) -> dict[str, float]:
    marks = {}
    t = time.perf_counter()
    from triage import pipeline
    from triage.apps import cli  # noqa: F401 - what `vllm-triage --format json` imports
    from triage.diagnose import report_builder
    from triage.diagnose.redact import LineRedactor
    from triage.ingest.read import InputStats, iter_chunks, open_source
    from triage.ingest.reshape import Unfolded
    from triage.ingest.scan import iter_marked
    from triage.parse import stream as stream_stage
    from triage.parse.vocabulary import matcher
    from triage.render import render
    from triage.timeline.timeline import Timeline

    marks["import"] = time.perf_counter() - t
    t = time.perf_counter()
    rules = pipeline.load_rules()
    marks["rules"] = time.perf_counter() - t
    t = time.perf_counter()
    stream, name = open_source(path)
    stats = InputStats(name=name)
    with stream:
        marked = list(
            iter_marked(iter_chunks(stream, stats), stats, matcher(), stream_stage.MAX_JOINS, wrap_sample=256 << 10)
        )
    marks["scan"] = time.perf_counter() - t
    t = time.perf_counter()
    pairs = list(stream_stage.line_events(Unfolded(iter(marked), matcher().classify), LineRedactor()))
    marks["parse"] = time.perf_counter() - t
    t = time.perf_counter()
    timeline, texts = Timeline(), {}
    for line, events in pairs:
        texts[line.no] = (line.origin, report_builder.evidence_text(line))
        timeline.feed(line, events)
    timeline.finish()
    report = report_builder.build_report(timeline, rules, texts, stats)
    marks["diagnose"] = time.perf_counter() - t
    t = time.perf_counter()
    render(report, "json")
    marks["render"] = time.perf_counter() - t
    marks["total"] = time.perf_counter() - T0
    return {k: round(v * 1000, 1) for k, v in marks.items()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
