"""Developer aid: show what the pipeline saw in a log (signals, phases, facts, diagnoses)."""

import sys

from triage.diagnose import diagnose_attempt
from triage.lines import peel
from triage.parse import parse_line, prefilter
from triage.pipeline import load_rules
from triage.read import InputStats, iter_lines, open_source
from triage.timeline import Timeline

path = sys.argv[1]
stream, name = open_source(path)
tl = Timeline()
texts = {}
for no, raw in enumerate(iter_lines(stream, InputStats(name)), 1):
    if not prefilter(raw):
        continue
    line = peel(raw, no)
    evs = parse_line(line)
    if evs:
        texts[no] = (line.origin, raw[:200])
        tl.feed(line, evs)
tl.finish()
rules = load_rules()
for a in tl.attempts:
    print(f"attempt {a.index} lines {a.first_line}-{a.last_line} ready={a.ready and a.ready.line} phases={a.origin_phase}")
    for s in a.signals:
        print(f"  signal L{s.line} {s.origin!r} root={s.root} phase={s.phase} after_ready={s.after_ready} "
              f"kinds={[e.kind for e in s.events]} chain_phase={s.chain.phase if s.chain else None}")
    f = a.fatal
    print("  fatal:", f and f.line)
    r = diagnose_attempt(a, rules, texts, len(tl.attempts))
    print("  facts:", {k: v.value for k, v in r.facts.items()})
    for d in r.diagnoses:
        print("  ->", d.id, d.rule, d.confidence, d.figures)
