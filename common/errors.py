"""Errors a user can act on: the CLI prints their message as one line and exits non-zero."""


class UserError(Exception):
    """Bad arguments or bad input; the message says what and where, no traceback is shown (exit 2)."""


class LakeDamaged(Exception):
    """A lake table that cannot be read: its ``_delta_log`` is not valid, or a file its version
    names is gone. The lake is damaged, not the arguments: one line naming the table and the
    problem, exit 1, and nothing is changed."""
