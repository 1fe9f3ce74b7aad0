"""The one redaction policy: what is masked, where, and who may turn it off.

Secrets are masked where a text *enters* a report, never on the way out:
- every log line, whole, before it is parsed, joined with a wrapped next line, or cut
  (`lines()`, handed to the parse stage, which masks nothing itself);
- the lines the error catalogue reads back from the log's tail, and the log's name (`text()`);
- the messages of errors, which may quote a path or a line of input: one-line errors on
  stderr, batch and fleet error records, the server's `{"error": ...}` answers (`text()`).

Rendered output is never scanned again. Every output path (the CLI's formats, `run --`,
`--follow`, batch and fleet reports, the step summary, the server's formats and the paste
page's JSON) lays out the same already-redacted report, so a secret is masked the same way
everywhere and the evidence text is the same in all of them; a pass over laid-out text would
mask the tool's own words and could cut through a JSON or XML quote.

`--no-redact` turns the policy off for a local report (the log command, `run`, `--follow`,
batch, fleet); the server has no such switch (`SERVER` is always on).
"""

from __future__ import annotations

from typing import Any

from triage.diagnose.redact import LineRedactor, redact_data, redact_shapes, redact_text


class Redaction:
    """Redaction on or off, asked for each kind of text that enters a report."""

    __slots__ = ("on",)

    def __init__(self, on: bool = True) -> None:
        self.on = on

    def lines(self) -> LineRedactor | None:
        """A fresh redactor for one log's lines (it remembers an open key block), or None."""
        return LineRedactor() if self.on else None

    def text(self, text: str) -> str:
        """A text from the input (a name, an error message, a catalogue line)."""
        return redact_text(text) if self.on else text

    def own_words(self, text: str) -> str:
        """The tool's words about a command line: only secrets known by their shape are masked,
        so "VLLM_TRIAGE_TOKEN: set it" stays a sentence."""
        return redact_shapes(text) if self.on else text

    def data(self, value: Any) -> Any:
        """Every string of JSON-like data (a pasted command line's plan)."""
        return redact_data(value) if self.on else value

    def __repr__(self) -> str:
        return f"Redaction(on={self.on})"


ON, OFF = Redaction(True), Redaction(False)
SERVER = ON  # what the server applies to every answer: it never un-redacts


def policy(redact: bool) -> Redaction:
    """The policy a `redact` flag (`Options.redact`, `--no-redact`) asks for."""
    return ON if redact else OFF
