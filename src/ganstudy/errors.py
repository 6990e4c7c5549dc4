"""The one exception type for mistakes a user can fix (bad config, missing file, bad rank count)."""


class GanstudyError(Exception):
    """A problem in the user's input; the message names it and says what to do.

    The CLI prints these without a traceback; anything else is a bug and keeps its traceback.
    """
