"""Bytes to marked physical lines: reading, repairs of pasted shapes, the multi-literal scan."""
