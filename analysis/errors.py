"""The one way a problem reaches the user: a HeapcostError printed on one line, or a one-line warning."""

class HeapcostError(Exception):
    """A problem the user can fix: printed as one line, exit status 2, no traceback."""


_RECORDERS: list[list[str]] = []


def warn(message: str) -> None:
    """A problem that does not stop the command but must not pass in silence: one line on stderr."""
    import sys

    for said in _RECORDERS:
        said.append(message)
    print(f"heapcost: warning: {message}", file=sys.stderr)


class recording:
    """`with recording() as said:` the warnings given inside, in order (they are printed as well), so a
    remembered result can say them again (publish/results/memo.py)."""

    def __enter__(self) -> list[str]:
        self.said = []
        _RECORDERS.append(self.said)
        return self.said

    def __exit__(self, *exc) -> None:
        _RECORDERS.remove(self.said)


def read_toml(path) -> dict:
    """A TOML file of the repository's, or a one-line error naming the file and what is wrong with it."""
    import tomllib
    from pathlib import Path

    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise HeapcostError(f"{path.name}: not valid TOML ({exc})") from None
