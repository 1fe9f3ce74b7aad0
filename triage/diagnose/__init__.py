"""Rules times attempts to diagnoses: matching, the memory view, redaction."""
