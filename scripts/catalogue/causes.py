"""Which cause each template names: the decision lives in the shipped package
(`triage/parse/message_causes.py`, with its wording in `message_wording.py`), which the
run-time reading of an uncatalogued message uses too; the build and the audit import it here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's triage/, run as a script

from triage.parse.message_causes import PLACES, cause_of

__all__ = ["PLACES", "cause_of"]
