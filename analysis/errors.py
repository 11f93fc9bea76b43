class HeapcostError(Exception):
    """A problem the user can fix: printed as one line, exit status 2, no traceback."""


def warn(message: str) -> None:
    """A problem that does not stop the command but must not pass in silence: one line on stderr."""
    import sys

    print(f"heapcost: warning: {message}", file=sys.stderr)
