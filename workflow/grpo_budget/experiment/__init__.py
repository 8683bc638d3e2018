"""Experiment definition: the config schema and its checks, typed settings, the grid and its paths, sweeps."""
