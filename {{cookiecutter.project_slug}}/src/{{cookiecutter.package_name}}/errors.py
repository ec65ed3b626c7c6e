"""The one exception type the command line turns into a plain message instead of a traceback."""


class UserError(Exception):
    """A mistake the user can fix: the message says what is wrong and what to do."""

    exit_code = 2
