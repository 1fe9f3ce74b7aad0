"""`--ignore CAUSE` and `--min-confidence F`: diagnoses left out of a report, said in its notes.

The report stays honest: a failed log stays failed (the server did not come up), only the
named diagnoses are not reported; a note says what was left out and why. A log whose only
findings were left out, and that did not fail, counts as clean (exit 0).
"""

from __future__ import annotations

from triage.model.report import Report


def apply(report: Report, ignore: list[str], min_confidence: float | None) -> Report:
    """The report without the ignored causes and the diagnoses below the floor."""
    if not ignore and min_confidence is None:
        return report
    kept, notes = [], []
    for diagnosis in report.diagnoses:
        if diagnosis.id in ignore:
            notes.append(f"{diagnosis.id} not reported: ignored (--ignore or the config file)")
        elif min_confidence is not None and diagnosis.confidence < min_confidence:
            notes.append(
                f"{diagnosis.id} not reported: confidence {diagnosis.confidence:.2f} is below "
                f"--min-confidence {min_confidence:g}"
            )
        else:
            kept.append(diagnosis)
    if not notes:
        return report
    return report.model_copy(update={"diagnoses": kept, "notes": [*report.notes, *notes]})
