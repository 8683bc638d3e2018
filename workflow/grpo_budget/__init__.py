"""grpo-budget: which examples should a fixed GRPO data budget buy?"""

__version__ = "0.1.0"
