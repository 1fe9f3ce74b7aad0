"""YAML packs to compiled rules: schema, strict loading, the expression language."""
