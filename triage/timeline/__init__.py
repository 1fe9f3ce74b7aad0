"""Events to attempts: signals, the fatal one, deaths, the figures a rule reads."""
