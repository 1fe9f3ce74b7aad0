"""The vocabulary every stage shares: events, phases, the report contract."""
