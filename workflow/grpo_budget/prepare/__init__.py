"""Prepare stage: dataset entries of the config as pool and test tables (built-in tasks and benchmark files)."""
