"""Aggregate stage: tables, verdicts and figures from the cached outputs, and the registry of outputs."""
