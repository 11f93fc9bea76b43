"""The one way a problem reaches the user: a HeapcostError printed on one line, or a one-line warning."""

class HeapcostError(Exception):
    """A problem the user can fix: printed as one line, exit status 2, no traceback."""


def warn(message: str) -> None:
    """A problem that does not stop the command but must not pass in silence: one line on stderr."""
    import sys

    print(f"heapcost: warning: {message}", file=sys.stderr)


def read_toml(path) -> dict:
    """A TOML file of the repository's, or a one-line error naming the file and what is wrong with it."""
    import tomllib
    from pathlib import Path

    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise HeapcostError(f"{path.name}: not valid TOML ({exc})") from None
