"""Lines to events: the grammar, its vocabulary, the parser and the transformer."""
