"""User-facing error type shared by every room.

A ``SpecError`` means the *input* is wrong (a degree that does not divide, a malformed unit,
an unknown option). Its message is one line: what, which value, which rule, how to fix.
Pipelines turn it into exit code 2 with no traceback and no results written.
It lives in the lowest room so that every room can raise it without breaking the
one-way dependency rule.
"""


class SpecError(ValueError):
    """Invalid user input; the message is a single self-explaining line."""

    def __init__(self, message: str):
        if "\n" in message:
            raise AssertionError("SpecError messages must be one line")
        super().__init__(message)
