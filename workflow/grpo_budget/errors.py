"""The one error type for a user's mistake: the CLI prints its message as one line and exits 2 (no traceback)."""


class UserError(ValueError):
    """Bad input, a missing or corrupt file, or a setting that cannot run: the message names it and the fix."""
