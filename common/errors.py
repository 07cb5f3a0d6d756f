"""Errors a user can act on: the CLI prints their message as one line and exits non-zero."""


class UserError(Exception):
    """Bad arguments or bad input; the message says what and where, no traceback is shown."""
