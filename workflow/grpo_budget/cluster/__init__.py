"""Cluster: the SLURM profile and controller launch, and the cost plan (work, rates, runtime requests)."""
