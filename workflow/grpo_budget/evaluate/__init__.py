"""Evaluate stage: the base model and every checkpoint of an arm on a test set."""
