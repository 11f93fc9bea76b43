"""Workloads users bring: EXTRA_WORKLOADS="name=command {scale}" runs a program of theirs under every selected
allocator like a built-in workload. It cannot take turns itself as the built-in C workloads do: one that runs a
single thread and does not wait is made to take turns from outside (harness/timing/alternation.py), the others run
as trials.

The command is split like a shell would split it (quotes group, nothing is expanded); `{scale}` is replaced by the
trial's scale. Several workloads are separated by commas or spaces: a new one starts at an unquoted word of the
form `name=...` at the start or after a comma or a space (a command argument of that form is written in quotes).
A program that prints `checksum=<hex>` as its last stdout line (the built-in workloads' convention) has it checked:
every trial must print the checksum it printed under plain glibc, and a trial that does not is `bad-checksum`.
"""
import hashlib
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.process.trial import is_static_elf
from analysis.harness.workloads.builtin import Workload, scale_arg
from analysis.paths import portable_path, portable_text

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
SCALE_FIELD = "{scale}"


@dataclass(frozen=True)
class CommandWorkload(Workload):
    command: str = ""          # as the user wrote it
    words: tuple = ()          # split, the program and the files it names made absolute
    files: tuple = ()          # (absolute path, sha256) of the program and of every existing file it names
    threads: bool = True       # a foreign program may start threads: its trials get every trial CPU

    checksum_required = False  # a program that prints no checksum is judged by its exit status alone

    def argv(self, scale, variant="glibc", interpreters=None) -> list:
        if variant != "glibc":
            raise HeapcostError(f"workload {self.id} is a program brought as it is: it runs on glibc only")
        value = scale_arg(scale)
        return [w.replace(SCALE_FIELD, value) for w in self.words]

    def record(self) -> dict:
        """What run.json keeps of it: the command and which files it ran, by hash, paths made portable."""
        return {"command": portable_text(self.command),
                "files": [{"path": portable_path(p), "sha256": h} for p, h in self.files]}


def split_items(spec: str) -> list[tuple[str, str]]:
    """(name, command) of each workload in an EXTRA_WORKLOADS value."""
    starts, quote = [], None
    for i, ch in enumerate(spec):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif (i == 0 or spec[i - 1] in ", \t\n") and (m := NAME.match(spec, i)) and spec[m.end():m.end() + 1] == "=":
            starts.append(i)
    if quote:
        raise HeapcostError(f"EXTRA_WORKLOADS has an unclosed {quote} quote: {spec!r}")
    head = spec[:starts[0] if starts else len(spec)].strip(", \t\n")
    if head:
        raise HeapcostError(f"extra workload {head!r} is not of the form name=command (a name may use only "
                            "letters, digits, - _ .)")
    items = []
    for start, end in zip(starts, [*starts[1:], len(spec)]):
        name, _, command = spec[start:end].strip(", \t\n").partition("=")
        items.append((name, command.strip()))
    return items


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _program(name: str, word: str) -> Path:
    return dynamic_program(word, f"extra workload {name}: ", "replace its malloc")


def dynamic_program(word: str, where: str = "", preload_does: str = "replace its malloc") -> Path:
    """The program a command's first word names (a path, or found on PATH), checked to be an executable that
    LD_PRELOAD can act on; otherwise a one-line error starting with `where`."""
    if "/" in word:
        path = Path(word).expanduser().absolute()
        if not path.exists():
            raise HeapcostError(f"{where}program {word} not found")
    else:
        found = shutil.which(word)
        if found is None:
            raise HeapcostError(f"{where}program {word!r} not found on PATH")
        path = Path(found).absolute()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise HeapcostError(f"{where}{path} is not an executable file")
    if is_static_elf(path):
        raise HeapcostError(f"{where}{path} is statically linked, so no LD_PRELOAD can {preload_does}: link it "
                            "dynamically")
    return path


def _named_file(word: str) -> Path | None:
    """The existing file a command word names (itself, the value of `--option=value`, or the response file of
    `@file`, whose words GCC's and binutils' programs read as arguments), relative to here."""
    for candidate in (word, word.partition("=")[2] if word.startswith("-") else "",
                      word[1:] if word.startswith("@") else ""):
        try:
            named = bool(candidate) and SCALE_FIELD not in candidate and Path(candidate).expanduser().is_file()
        except OSError:  # a word longer than a file name can be (an SQL statement) names no file
            named = False
        if named:
            return Path(candidate).expanduser().absolute()
    return None


def absolute_word(word: str) -> tuple[str, Path | None]:
    """A command word as a run in a scratch folder needs it: one naming an existing file (itself, as the value of
    `--option=value`, or as `@file`) rewritten to the absolute path, with that file (None for any other word)."""
    path = _named_file(word)
    if path is None:
        return word, None
    if Path(word).expanduser().is_file():
        return str(path), path
    return (f"{word.partition('=')[0]}={path}" if word.startswith("-") else f"@{path}"), path


def command_workload(name: str, command: str, taken=()) -> CommandWorkload:
    if not NAME.fullmatch(name or ""):
        raise HeapcostError(f"extra workload name {name!r} may use only letters, digits, - _ . (and not start "
                            "with - _ .)")
    if name in taken:
        raise HeapcostError(f"extra workload name {name!r} is already a workload or group; choose another")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise HeapcostError(f"extra workload {name}: cannot split its command ({exc})") from None
    if not words:
        raise HeapcostError(f"extra workload {name} has no command (write name=command)")
    program = _program(name, words[0])
    out, files = [str(program)], [(str(program), _sha256(program))]
    for word in words[1:]:
        # the trial runs in a scratch folder: a relative path must name the same file from there
        word, path = absolute_word(word)
        out.append(word)
        if path is not None:
            files.append((str(path), _sha256(path)))
    return CommandWorkload(name, "command", f"brought by the user: {portable_text(command)}", None,
                           f"{SCALE_FIELD} = the trial's scale" if SCALE_FIELD in command else "no scale argument",
                           default=False, command=command, words=tuple(out), files=tuple(files))


def parse_extra_workloads(spec, taken=()) -> list[CommandWorkload]:
    """The workloads of EXTRA_WORKLOADS (a string, or a list of them for a repeated option)."""
    if spec is None:
        return []
    text = spec if isinstance(spec, str) else ",".join(s for s in spec if s)
    chosen = []
    for name, command in split_items(text):
        chosen.append(command_workload(name, command, {*taken, *(w.id for w in chosen)}))
    return chosen
