"""The one way a problem reaches the user: a HeapcostError printed on one line, or a one-line warning."""

class HeapcostError(Exception):
    """A problem the user can fix: printed as one line, exit status 2, no traceback."""


_RECORDERS: list[tuple[list[str], bool]] = []  # (what was said, whether it is printed), innermost last


def warn(message: str) -> None:
    """A problem that does not stop the command but must not pass in silence: one line on stderr."""
    import sys

    for said, echo in reversed(_RECORDERS):
        said.append(message)
        if not echo:  # kept by a quiet recorder: neither printed nor passed to those outside it
            return
    print(f"heapcost: warning: {message}", file=sys.stderr)


class recording:
    """`with recording() as said:` the warnings given inside, in order (they are printed as well), so a
    remembered result can say them again (publish/results/memo.py). With `echo=False` they are kept here only:
    for a side computation whose warnings concern what the command was not asked about."""

    def __init__(self, echo: bool = True):
        self.echo = echo

    def __enter__(self) -> list[str]:
        self.said = []
        self._entry = (self.said, self.echo)
        _RECORDERS.append(self._entry)
        return self.said

    def __exit__(self, *exc) -> None:
        del _RECORDERS[next(i for i, e in enumerate(_RECORDERS) if e is self._entry)]


def read_toml(path) -> dict:
    """A TOML file of the repository's, or a one-line error naming the file and what is wrong with it."""
    import tomllib
    from pathlib import Path

    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise HeapcostError(f"{path.name}: not valid TOML ({exc})") from None
