"""The contribution archive: `contribute` packs a run into one, `merge` unpacks it (analysis/publish/dataset/intake.py).

A contribution is one gzip'd tar: MANIFEST.json first (its format, the run id, the host's machine
description, the name of its machine, the sha256 and size of every file), then the run directory. Its bytes
depend on the run's files only (fixed mtimes, owners and gzip header), so packing a run twice gives the same
archive. A machine.json whose `machine_id` is not the short hash of a boot id is never packed.

An archive is untrusted input, read as a stream and refused with one line at the first thing wrong. From
the tar headers alone, before a member's bytes are read: a member that is not a plain file, lies outside
the run, is not in the manifest or comes twice, whose size differs from the manifest's, exceeds the
per-file or per-archive limit (Limits), or would make the archive expand more than `ratio` times its
compressed size; tar headers (pax or GNU extensions included) over 1 MiB between two members. A manifest
over 1 MiB, listing more files than a run has (run_check.MAX_RUN_FILES) or a file twice is refused too,
and so is a gzip stream that ends early. Members are hashed while they are copied to a private folder,
one 64 KiB block at a time, so reading an archive takes the same memory whatever it holds. Archives of
the first contribution format (checksums without sizes) are read with the same limits, from the headers.
"""
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from analysis.contract.host import MACHINE_ID_DIGITS, machine_of
from analysis.errors import HeapcostError
from analysis.paths import file_sha256
from analysis.contract.run_check import GiB, INTAKE_FILE, KiB, MAX_RUN_FILES, MiB, check_readable, parse_json, run_paths

CONTRIBUTION_FORMAT = "heapcost-contribution/2"  # files: name -> {"sha256": ..., "size": bytes}
SIZELESS_FORMAT = "heapcost-contribution/1"  # files: name -> sha256; still read
READABLE_CONTRIBUTION_FORMATS = (SIZELESS_FORMAT, CONTRIBUTION_FORMAT)
MANIFEST = "MANIFEST.json"
FIXED_MTIME = 1767225600
BLOCK = 64 * KiB  # what is read, hashed and written at a time
MAX_HEADER_BYTES = 1 * MiB  # tar headers and their pax or GNU extensions between two members
MAX_MANIFEST_BYTES = 1 * MiB
SHA256 = re.compile(r"[0-9a-f]{64}")
MACHINE_ID = re.compile(r"[0-9a-f]{%d}" % MACHINE_ID_DIGITS)


@dataclass(frozen=True)
class Limits:
    """What one contribution may hold, checked from the tar headers before a member is read."""
    file_bytes: int = 1 * GiB
    archive_bytes: int = 4 * GiB  # the sum of its files
    ratio: float = 100.0  # expanded over compressed bytes, whole archive (the published runs: at most 25)


LIMITS = Limits()


def recorded_machine(run_id: str, run_dir: Path) -> dict:
    """The run's machine.json, refused with one line when it records a `machine_id` that is not
    MACHINE_ID_DIGITS lowercase hex digits: the id is a short hash of the boot id, and anything else (the raw
    boot id) would tell who measured. The value itself is never repeated in the message."""
    machine = parse_json(run_paths(run_dir)["machine.json"].read_bytes(), f"{run_id}: machine.json")
    recorded = machine.get("machine_id") if isinstance(machine, dict) else None
    if recorded is not None and not (isinstance(recorded, str) and MACHINE_ID.fullmatch(recorded)):
        raise HeapcostError(f"{run_id}: machine.json's machine_id is not {MACHINE_ID_DIGITS} lowercase hex digits "
                            "(a raw boot id would identify the machine); refused")
    return machine


def manifest(run_id: str, run_dir: Path) -> dict:
    """The contribution's MANIFEST.json: its format, the run id, the run's machine.json (`machine`), the
    name of its machine as the run alone gives it (`machine_name`, M-/K-: analysis/contract/host.py; a run
    without a boot id may join a fuller processor kind in a dataset, and a K- name with it), and every
    file's sha256 and size."""
    paths = run_paths(run_dir)
    machine = recorded_machine(run_id, run_dir)
    return {"format": CONTRIBUTION_FORMAT, "run_id": run_id, "machine": machine,
            "machine_name": machine_of(machine).name,
            "files": {name: {"sha256": file_sha256(path), "size": path.stat().st_size}
                      for name, path in sorted(paths.items())}}


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, FIXED_MTIME, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack(run_dir: Path, out_dir: Path) -> Path:
    """Write <out_dir>/<run id>.heapcost-run.tar.gz from a complete run; returns its path. The files are
    streamed into the archive, never held whole."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HeapcostError(f"{run_dir} is not a run directory")
    check_readable(run_dir.name, run_dir)
    man = (json.dumps(manifest(run_dir.name, run_dir), indent=2, sort_keys=True) + "\n").encode()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{run_dir.name}.heapcost-run.tar.gz"
    partial = out_dir / f".{out.name}.partial"
    try:
        # mtime=0 and no file name in the gzip header: the bytes depend on the run's files only
        with open(partial, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                       compresslevel=9) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(_tarinfo(MANIFEST, len(man)), io.BytesIO(man))
            for name, path in sorted(run_paths(run_dir).items()):
                with open(path, "rb") as fh:
                    tar.addfile(_tarinfo(f"{run_dir.name}/{name}", path.stat().st_size), fh)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


# ------------------------------------------------------------------------------------------------- unpack
class _TarStream:
    """The tar inside the gzip stream as tarfile reads it: reads of tar headers and their extensions (a pax
    header, a GNU long name, sparse maps, which tarfile reads whole) are refused past MAX_HEADER_BYTES
    between two members, so a header declaring gigabytes is never read; a member's bytes are read by
    _copy_member, one BLOCK at a time."""

    def __init__(self, fileobj, where: str):
        self.fileobj, self.where, self.header_bytes, self.in_member = fileobj, where, 0, False

    def read(self, n=-1):
        if not self.in_member:
            if n is None or n < 0 or self.header_bytes + n > MAX_HEADER_BYTES:
                raise HeapcostError(f"{self.where}: tar headers of more than {MAX_HEADER_BYTES // MiB} MiB "
                                    f"before a member; refused")
            self.header_bytes += n
        return self.fileobj.read(n)

    def seek(self, pos, whence=0):
        return self.fileobj.seek(pos, whence)

    def tell(self):
        return self.fileobj.tell()


def _valid_name(rel) -> bool:
    parts = rel.split("/") if isinstance(rel, str) else []
    return (bool(parts) and all(p and not p.startswith(".") and "\0" not in p and "\\" not in p for p in parts)
            and rel != INTAKE_FILE)


def _listing(man: dict, where: str, limits: Limits) -> tuple[dict[str, str], dict[str, int]]:
    """The manifest's files as (name -> sha256, name -> declared size; empty for the sizeless format)."""
    listed = man.get("files")
    if not isinstance(listed, dict) or not listed:
        raise HeapcostError(f"{where}: the manifest lists no files")
    if len(listed) > MAX_RUN_FILES:
        raise HeapcostError(f"{where}: the manifest lists {len(listed)} files; a run has at most {MAX_RUN_FILES}; "
                            "refused")
    digests, sizes = {}, {}
    for name, entry in listed.items():
        if not _valid_name(name):
            raise HeapcostError(f"{where}: the manifest lists {name!r}, not a run's file; refused")
        if man["format"] == SIZELESS_FORMAT:
            digest, size = entry, None
        elif isinstance(entry, dict):
            digest, size = entry.get("sha256"), entry.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise HeapcostError(f"{where}: the manifest gives {name} no size in bytes ({size!r})")
            if size > limits.file_bytes:
                raise HeapcostError(f"{where}: {name} is {size} bytes, over the per-file limit of "
                                    f"{limits.file_bytes} (--max-file-size); refused")
            sizes[name] = size
        else:
            digest = None
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise HeapcostError(f"{where}: the manifest gives {name} no sha256")
        digests[name] = digest
    if sum(sizes.values()) > limits.archive_bytes:
        raise HeapcostError(f"{where}: the manifest's files add up to {sum(sizes.values())} bytes, over the "
                            f"per-archive limit of {limits.archive_bytes} (--max-archive-size); refused")
    return digests, sizes


def _read_manifest(tar: tarfile.TarFile, stream: _TarStream, where: str, limits: Limits) -> tuple[dict, dict, dict]:
    member = tar.next()
    if member is None or member.name != MANIFEST:
        raise HeapcostError(f"{where}: {MANIFEST} is not its first member; not made by `make contribute`")
    if not member.isreg() or member.issparse():
        raise HeapcostError(f"{where}: {MANIFEST} is not a plain file; refused")
    if member.size > MAX_MANIFEST_BYTES:
        raise HeapcostError(f"{where}: {MANIFEST} is {member.size} bytes, more than a run's manifest "
                            f"({MAX_MANIFEST_BYTES // MiB} MiB); refused")
    stream.in_member = True
    data = tar.extractfile(member).read()
    stream.in_member, stream.header_bytes = False, 0
    man = parse_json(data, f"{where}: {MANIFEST}")
    if not isinstance(man, dict):
        raise HeapcostError(f"{where}: {MANIFEST} is not a JSON object")
    if man.get("format") not in READABLE_CONTRIBUTION_FORMATS:
        raise HeapcostError(f"{where}: contribution format {man.get('format')!r} cannot be read "
                            f"(this heapcost reads {', '.join(READABLE_CONTRIBUTION_FORMATS)})")
    run_id = man.get("run_id")
    if not isinstance(run_id, str) or not _valid_name(run_id) or "/" in run_id:
        raise HeapcostError(f"{where}: the manifest names no valid run id ({run_id!r})")
    digests, sizes = _listing(man, where, limits)
    return man, digests, sizes


def _copy_member(tar, stream: _TarStream, member, target: Path, where: str) -> str:
    """Copy a member to target in blocks; its sha256."""
    digest, copied = hashlib.sha256(), 0
    stream.in_member = True
    with tar.extractfile(member) as src, open(target, "xb") as out:
        for block in iter(lambda: src.read(BLOCK), b""):
            digest.update(block)
            out.write(block)
            copied += len(block)
    stream.in_member, stream.header_bytes = False, 0
    if copied != member.size:
        raise HeapcostError(f"{where}: {member.name} ends after {copied} of its {member.size} bytes (truncated?)")
    return digest.hexdigest()


def unpack(archive: Path, into: Path, limits: Limits = LIMITS) -> tuple[str, dict]:
    """Check a contribution while copying its run's files to the empty folder `into`; (run id,
    provenance). Nothing is read that the headers already condemn (the module's docstring lists what)."""
    archive, into = Path(archive), Path(into)
    where = archive.name
    try:
        compressed = archive.stat().st_size
        with open(archive, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            stream = _TarStream(gz, where)
            with tarfile.open(fileobj=stream, mode="r:") as tar:
                man, digests, sizes = _read_manifest(tar, stream, where, limits)
                run_id, seen, total = man["run_id"], set(), 0
                while (member := tar.next()) is not None:
                    name = member.name
                    top, _, rel = name.partition("/")
                    if not member.isreg() or member.issparse():
                        raise HeapcostError(f"{where}: member {name!r} is not a plain file; refused")
                    if top != run_id or not _valid_name(rel):
                        raise HeapcostError(f"{where}: member {name!r} lies outside run {run_id}; refused")
                    if rel not in digests:
                        raise HeapcostError(f"{where}: member {name!r} is not in the manifest; refused unread")
                    if rel in seen:
                        raise HeapcostError(f"{where}: member {name!r} comes twice; refused")
                    if rel in sizes and member.size != sizes[rel]:
                        raise HeapcostError(f"{where}: member {name!r} is {member.size} bytes by its header, "
                                            f"{sizes[rel]} by the manifest; refused unread")
                    if member.size > limits.file_bytes:
                        raise HeapcostError(f"{where}: member {name!r} is {member.size} bytes, over the per-file "
                                            f"limit of {limits.file_bytes} (--max-file-size); refused unread")
                    total += member.size
                    if total > limits.archive_bytes:
                        raise HeapcostError(f"{where}: its files add up to more than the per-archive limit of "
                                            f"{limits.archive_bytes} bytes (--max-archive-size); refused")
                    expanded = member.offset_data + member.size
                    if expanded > limits.ratio * compressed:
                        raise HeapcostError(f"{where}: expands over {limits.ratio:g} times its {compressed} "
                                            f"compressed bytes (--max-ratio); refused")
                    seen.add(rel)
                    (into / rel).parent.mkdir(parents=True, exist_ok=True)
                    if _copy_member(tar, stream, member, into / rel, where) != digests[rel]:
                        raise HeapcostError(f"{where}: {rel} does not match its sha256 in the manifest (damaged?)")
    except EOFError:
        raise HeapcostError(f"{archive}: the gzip stream ends early (truncated archive); refused") from None
    except RecursionError:
        raise HeapcostError(f"{archive}: tar headers chained deeper than any archive's; refused") from None
    except (OSError, tarfile.TarError, zlib.error) as exc:
        raise HeapcostError(f"{archive}: not a readable contribution archive ({exc})") from None
    missing = sorted(set(digests) - seen)
    if missing:
        raise HeapcostError(f"{where}: the files differ from the manifest's list (missing {missing[:3]})")
    provenance = {"source": "contribution", "archive_sha256": file_sha256(archive), "files": digests}
    return run_id, provenance

