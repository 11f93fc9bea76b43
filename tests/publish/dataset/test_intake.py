"""contribute and merge (analysis/contract/contribution.py, run_check.py, intake.py): a run travels as one
archive and joins a dataset validated, never overwriting, idempotently; runs it cannot read are refused with
one line, and so is a hostile archive, from its headers when they suffice, in bounded memory, leaving the
dataset as it was."""
import gzip
import io
import json
import shutil
import struct
import subprocess
import sys
import tarfile
import zlib

import pytest

from conftest import REPO, cli, cli_here
from analysis.errors import HeapcostError
from analysis.contract import contribution, run_check
from analysis.contract.host import boot_machine_id, machine_of
from analysis.publish.dataset import archive, intake
from analysis.publish.dataset.datapackage import write_datapackage

PUBLISHED = REPO / "data" / "runs"
TWO_RUNS = ("20261130T125006Z-callgrind-full", "20261130T135001Z-time-quick")  # small runs, one host
MiB, GiB = 1 << 20, 1 << 30


def empty_dataset(root):
    data = root / "data"
    (data / "runs").mkdir(parents=True)
    shutil.copytree(REPO / "data" / "literature", data / "literature")
    write_datapackage(data)
    return data


def copy_run(run_id, where):
    return shutil.copytree(PUBLISHED / run_id, where / run_id)


def edit_run_json(run_dir, **changes):
    info = json.loads((run_dir / "run.json").read_text())
    info.update(changes)
    (run_dir / "run.json").write_text(json.dumps(info, indent=2) + "\n")


def edit_machine_json(run_dir, **changes):
    machine = json.loads((run_dir / "machine.json").read_text())
    machine.update(changes)
    (run_dir / "machine.json").write_text(json.dumps(machine, indent=2) + "\n")


def state(data):
    """Every path under data with its bytes (folders as None): what a refused merge must leave as it was."""
    return {p.relative_to(data).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(data.rglob("*"))}


def members_of(archive):
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def tar_gz(path, members):
    """A gzip'd tar of members in their order: (name or TarInfo, bytes or None for a header alone)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = name if isinstance(name, tarfile.TarInfo) else tarfile.TarInfo(name)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, None if data is None else io.BytesIO(data))
    return path


def listing(files, sizes=True):
    return {name: ({"sha256": run_check.sha256_bytes(data), "size": len(data)} if sizes else run_check.sha256_bytes(data))
            for name, data in sorted(files.items())}


def archive_of(path, run_id, files, man=None, extra=()):
    """An archive laid out as `make contribute` lays it out, with an honest manifest unless `man` is given
    (a dict, or the manifest's bytes), then `extra` members."""
    if man is None:
        man = {"format": contribution.CONTRIBUTION_FORMAT, "run_id": run_id, "machine": {}, "files": listing(files)}
    text = man if isinstance(man, bytes) else json.dumps(man).encode()
    return tar_gz(path, [(contribution.MANIFEST, text), *((f"{run_id}/{n}", d) for n, d in sorted(files.items())), *extra])


def zero_member_archive(path, members, name, size, block=MiB):
    """A valid gzip'd tar of `members` ((name, bytes)) then `name` holding `size` zero bytes, written as a
    stream in a few MB: the zeros are one deflate segment of `block` zeros repeated (a full flush ends
    each segment free of what came before), the gzip trailer carries their CRC and length."""
    assert size % block == 0
    head = b""
    for member, data in [*members, (name, None)]:
        info = tarfile.TarInfo(member)
        info.size = size if data is None else len(data)
        head += info.tobuf(format=tarfile.PAX_FORMAT)
        if data is not None:
            head += data + bytes(-len(data) % tarfile.BLOCKSIZE)
    zeros, tail = bytes(block), bytes(2 * tarfile.BLOCKSIZE)  # the tar's end-of-archive blocks
    first, segment, last = (zlib.compressobj(9, zlib.DEFLATED, -15) for _ in range(3))
    crc = zlib.crc32(head)
    with open(path, "wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        out.write(first.compress(head) + first.flush(zlib.Z_FULL_FLUSH))
        deflated = segment.compress(zeros) + segment.flush(zlib.Z_FULL_FLUSH)
        for _ in range(size // block):
            out.write(deflated)
            crc = zlib.crc32(zeros, crc)
        out.write(last.compress(tail) + last.flush())
        crc = zlib.crc32(tail, crc)
        out.write(struct.pack("<II", crc, (len(head) + size + len(tail)) & 0xFFFFFFFF))
    return path


@pytest.fixture
def packed(tmp_path):
    """(the run's id, its files, a dataset to merge into, the archive `make contribute` makes of it)."""
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    return run.name, run_check.run_files(run), empty_dataset(tmp_path / "one"), contribution.pack(run, tmp_path / "out")


def refused(data, *sources, options=()):
    """stderr of a merge that must fail with one line and leave data/ as it was."""
    before = state(data)
    r = cli_here("merge", "--data", str(data), *options, *map(str, sources))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert state(data) == before
    return r.stderr


# ----------------------------------------------------------------------------------------- a good run
def test_every_published_run_is_one_merge_can_read():
    for run in sorted(p for p in PUBLISHED.iterdir() if p.is_dir()):
        run_check.check_readable(run.name, run)


def test_a_run_packed_twice_gives_the_same_bytes_and_unpacks_to_its_files(tmp_path):
    run = copy_run(TWO_RUNS[1], tmp_path)
    first = contribution.pack(run, tmp_path / "a").read_bytes()
    second = contribution.pack(run, tmp_path / "b").read_bytes()
    assert first == second
    run_id, provenance = contribution.unpack(tmp_path / "a" / f"{run.name}.heapcost-run.tar.gz", tmp_path / "in")
    assert run_id == run.name and run_check.run_files(tmp_path / "in") == run_check.run_files(run)
    assert provenance["files"]["machine.json"] == run_check.sha256_bytes((run / "machine.json").read_bytes())
    man = json.loads(members_of(tmp_path / "a" / f"{run.name}.heapcost-run.tar.gz")[contribution.MANIFEST])
    assert man["format"] == contribution.CONTRIBUTION_FORMAT  # each file's size beside its sha256
    assert man["files"]["trials.csv"] == {"sha256": run_check.sha256_bytes((run / "trials.csv").read_bytes()),
                                          "size": (run / "trials.csv").stat().st_size}


def test_merging_two_runs_twice_gives_the_same_dataset_checksum(tmp_path):
    archives = [contribution.pack(copy_run(r, tmp_path / "src"), tmp_path / "out") for r in TWO_RUNS]
    data = empty_dataset(tmp_path / "one")
    assert intake.merge(archives, data) == [(r, "added") for r in TWO_RUNS]
    once = archive.checksum(data, citation=None)
    assert intake.merge(archives, data) == [(r, "already in the dataset, unchanged") for r in TWO_RUNS]
    assert archive.checksum(data, citation=None) == once
    other = empty_dataset(tmp_path / "two")  # the same runs merged elsewhere, in the other order
    intake.merge(list(reversed(archives)), other)
    assert archive.checksum(other, citation=None) == once
    for run_id in TWO_RUNS:  # byte for byte, with where it came from beside it
        assert run_check.run_files(data / "runs" / run_id) == run_check.run_files(PUBLISHED / run_id)
        provenance = json.loads((data / "runs" / run_id / "intake.json").read_text())
        assert provenance["source"] == "contribution" and len(provenance["archive_sha256"]) == 64
        assert provenance["files"] == run_check.run_digests(PUBLISHED / run_id)
    described = {r["path"] for r in json.loads((data / "datapackage.json").read_text())["resources"]}
    assert f"runs/{TWO_RUNS[1]}/trials.csv" in described
    assert not list((data / "runs").glob(".*"))  # no staging folder left behind


def test_an_archive_of_the_sizeless_format_still_merges(tmp_path, packed):
    run_id, files, data, _ = packed
    man = {"format": "heapcost-contribution/1", "run_id": run_id, "machine": {}, "files": listing(files, sizes=False)}
    archive = archive_of(tmp_path / "old.tar.gz", run_id, files, man)
    assert intake.merge([archive], data) == [(run_id, "added")]
    assert run_check.run_files(data / "runs" / run_id) == files
    # the limits hold for it too, from the tar headers
    other = empty_dataset(tmp_path / "other")
    assert "over the per-file limit" in refused(other, archive, options=("--max-file-size", "4KiB"))


def test_a_different_run_under_an_existing_id_is_refused_and_nothing_is_overwritten(tmp_path):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    intake.merge([run], data)
    before = run_check.run_files(data / "runs" / run.name)
    edit_run_json(run, elapsed_s=1.0)
    with pytest.raises(HeapcostError, match="already holds a different run"):
        intake.merge([run], data)
    assert run_check.run_files(data / "runs" / run.name) == before
    # the same through an archive, as a contributor would send it
    archive = contribution.pack(run, tmp_path / "out")
    assert "already holds a different run under this id" in refused(data, archive)


@pytest.mark.parametrize("change, message", [
    ({"format": "heapcost-run/2"}, "run format 'heapcost-run/2' cannot be read"),
    ({"kind": "energy"}, "run kind 'energy' is unknown"),
    ({"status": "running"}, "not complete"),
])
def test_a_run_this_version_cannot_read_is_refused_before_anything_is_written(tmp_path, change, message):
    data = empty_dataset(tmp_path)
    good = copy_run(TWO_RUNS[0], tmp_path / "src")
    bad = copy_run(TWO_RUNS[1], tmp_path / "src")
    edit_run_json(bad, **change)
    with pytest.raises(HeapcostError, match=message):
        intake.merge([good, bad], data)
    assert not any((data / "runs").iterdir())


def test_an_unknown_protocol_or_table_header_is_refused(tmp_path):
    run = copy_run(TWO_RUNS[1], tmp_path)
    info = json.loads((run / "run.json").read_text())
    edit_run_json(run, params={**info["params"], "protocol": "interleaved"})
    with pytest.raises(HeapcostError, match="timing protocol 'interleaved' is unknown"):
        run_check.check_readable(run.name, run)
    edit_run_json(run, params=info["params"])
    text = (run / "trials.csv").read_text()
    (run / "trials.csv").write_text("when," + text)
    with pytest.raises(HeapcostError, match="trials.csv has columns this heapcost does not know"):
        run_check.check_readable(run.name, run)


def test_a_table_that_breaks_its_schema_is_refused(tmp_path):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    lines = (run / "trials.csv").read_text().splitlines(keepends=True)
    lines.append(lines[-1])  # a second row with the same seq
    (run / "trials.csv").write_text("".join(lines))
    with pytest.raises(HeapcostError, match="does not validate"):
        intake.merge([run], data)
    assert not any((data / "runs").iterdir())


def test_a_damaged_archive_is_refused(tmp_path, packed):
    run_id, files, data, archive = packed
    members = members_of(archive)
    name = f"{run_id}/trials.csv"
    members[name] = members[name].replace(b"ok", b"ko", 1)
    tar_gz(archive, list(members.items()))
    assert "trials.csv does not match its sha256" in refused(data, archive)


# ---------------------------------------------------------------------------- the run's machine
RAW_BOOT_ID = "3f2b9c1e-7a4d-4e8b-9c21-5d6f7a8b9c0d"


def test_the_manifest_names_the_runs_machine_beside_its_machine_json(tmp_path):
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    machine = json.loads((run / "machine.json").read_text())
    man = contribution.manifest(run.name, run)
    assert man["machine"] == machine and man["machine_name"] == machine_of(machine).name
    assert man["machine_name"].startswith("K-")  # a published run: no boot id, its kind and kernel build
    edit_machine_json(run, machine_id=boot_machine_id(RAW_BOOT_ID))
    packed = contribution.pack(run, tmp_path / "out")
    man = json.loads(members_of(packed)[contribution.MANIFEST])
    assert man["machine_name"] == "M-" + boot_machine_id(RAW_BOOT_ID)[:6]
    assert man["machine"]["machine_id"] == boot_machine_id(RAW_BOOT_ID)


def test_a_run_with_a_boot_hash_or_none_recorded_merges(tmp_path):
    data = empty_dataset(tmp_path)
    hashed = copy_run(TWO_RUNS[1], tmp_path / "src")
    edit_machine_json(hashed, machine_id=boot_machine_id(RAW_BOOT_ID))
    unreadable = copy_run(TWO_RUNS[0], tmp_path / "src")
    edit_machine_json(unreadable, machine_id=None)  # the harness could not read a boot id
    assert dict(intake.merge([hashed, unreadable], data)) == {hashed.name: "added", unreadable.name: "added"}


@pytest.mark.parametrize("machine_id", [RAW_BOOT_ID, "3F2B9C1E7A4D", "3f2b9c1e7a4", "3f2b9c1e7a4d0", 12345])
def test_a_machine_id_that_is_not_a_boot_hash_is_refused_with_one_line(tmp_path, machine_id):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    edit_machine_json(run, machine_id=machine_id)
    message = f"{run.name}: machine.json's machine_id is not 12 lowercase hex digits"
    with pytest.raises(HeapcostError, match=message) as refusal:
        intake.merge([run], data)
    assert str(machine_id) not in str(refusal.value)  # the message never repeats what it refuses
    assert not any((data / "runs").iterdir())
    with pytest.raises(HeapcostError, match=message):  # the contributor learns it before sending
        contribution.pack(run, tmp_path / "out")
    # an archive made by hand, with an honest manifest: refused all the same
    path = archive_of(tmp_path / "leaking.tar.gz", run.name, run_check.run_files(run))
    stderr = refused(data, path)
    assert message in stderr and str(machine_id) not in stderr


# ------------------------------------------------------------------------- refused from the headers
def link(name):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info


@pytest.mark.parametrize("case, message", [
    ("unlisted", "member '{id}/extra.bin' is not in the manifest; refused unread"),
    ("twice", "member '{id}/run.json' comes twice"),
    ("size", "member '{id}/trials.csv' is {size} bytes by its header, 10 by the manifest; refused unread"),
    ("link", "member '{id}/trials.csv' is not a plain file"),
    ("dotdot", "member '{id}/../escape' lies outside run"),
    ("absolute", "member '/etc/cron.d/x' lies outside run"),
    ("manifest last", "MANIFEST.json is not its first member"),
    ("no manifest", "MANIFEST.json is not its first member"),
    ("missing", "the files differ from the manifest's list (missing ['trials.csv'])"),
    ("long pax header", "tar headers of more than 1 MiB before a member; refused"),
    ("large manifest", "MANIFEST.json is 2097"),
])
def test_an_archive_that_differs_from_its_manifest_is_refused_with_one_line(tmp_path, packed, case, message):
    run_id, files, data, _ = packed
    rest = {n: d for n, d in files.items() if n != "trials.csv"}
    man = {"format": contribution.CONTRIBUTION_FORMAT, "run_id": run_id, "machine": {}, "files": listing(files)}
    path = tmp_path / "hostile.tar.gz"
    if case == "unlisted":
        archive_of(path, run_id, files, extra=[(f"{run_id}/extra.bin", b"x" * 100)])
    elif case == "twice":
        archive_of(path, run_id, files, extra=[(f"{run_id}/run.json", files["run.json"])])
    elif case == "size":
        man["files"]["trials.csv"]["size"] = 10
        archive_of(path, run_id, files, man)
    elif case == "link":
        archive_of(path, run_id, rest, man, extra=[(link(f"{run_id}/trials.csv"), None)])
    elif case in ("dotdot", "absolute"):
        name = f"{run_id}/../escape" if case == "dotdot" else "/etc/cron.d/x"
        archive_of(path, run_id, files, extra=[(name, b"x")])
    elif case == "manifest last":
        tar_gz(path, [*((f"{run_id}/{n}", d) for n, d in files.items()), (contribution.MANIFEST, json.dumps(man).encode())])
    elif case == "long pax header":  # tarfile reads a pax header whole: this one is never read
        info = tarfile.TarInfo(f"{run_id}/notes.txt")
        info.pax_headers = {"comment": "c" * (2 * MiB)}
        archive_of(path, run_id, files, extra=[(info, b"x")])
    elif case == "large manifest":
        archive_of(path, run_id, files, {**man, "machine": {"notes": "m" * (2 * MiB)}})
    elif case == "no manifest":
        tar_gz(path, [(f"{run_id}/{n}", d) for n, d in files.items()])
    else:
        archive_of(path, run_id, rest, man)
    assert message.format(id=run_id, size=len(files["trials.csv"])) in refused(data, path)


def test_the_limits_refuse_from_the_headers_and_an_option_raises_them(tmp_path, packed):
    run_id, files, data, archive = packed
    assert "over the per-file limit of 4096 (--max-file-size)" in refused(data, archive, options=("--max-file-size", "4KiB"))
    assert "over the per-archive limit of 51200 (--max-archive-size)" in refused(
        data, archive, options=("--max-archive-size", "50K"))
    run_dir = tmp_path / "src" / run_id  # a run directory is held to the same limits
    assert "over the per-file limit of 4096 (--max-file-size)" in refused(data, run_dir, options=("--max-file-size", "4KiB"))
    # a file of zeros, listed honestly: far beyond any run's compression
    big = {**files, "zeros.bin": bytes(8 * MiB)}
    zeros = archive_of(tmp_path / "zeros.tar.gz", run_id, big)
    assert "expands over 100 times" in refused(data, zeros)
    assert intake.merge([zeros], data, limits=contribution.Limits(ratio=10_000)) == [(run_id, "added")]
    assert intake.byte_size("1GiB") == GiB and intake.byte_size("512M") == 512 * MiB and intake.byte_size("100") == 100


def test_a_manifest_declaring_more_than_the_limits_is_refused_before_any_member(tmp_path, packed):
    run_id, files, data, _ = packed
    man = {"format": contribution.CONTRIBUTION_FORMAT, "run_id": run_id, "machine": {}, "files": listing(files)}
    man["files"]["trials.csv"]["size"] = 2 * GiB
    path = archive_of(tmp_path / "big.tar.gz", run_id, {}, man)  # no member at all: the manifest suffices
    assert f"trials.csv is {2 * GiB} bytes, over the per-file limit" in refused(data, path)
    man["files"] = {f"part{i}.csv": {"sha256": "0" * 64, "size": GiB} for i in range(5)}
    assert "over the per-archive limit" in refused(data, archive_of(path, run_id, {}, man))


# ---------------------------------------------------------------------------------- hostile contents
def deep_json(depth):
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("case, message", [
    ("many members", "the manifest lists 5004 files; a run has at most 1000; refused"),
    ("named twice", "MANIFEST.json names 'trials.csv' twice; refused"),
    ("long field", "trials.csv line 2: a field of 1000000 characters (at most 131072); refused"),
    ("deep run.json", "run.json nests deeper than any heapcost JSON; refused"),
    ("deep manifest", "MANIFEST.json nests deeper than any heapcost JSON; refused"),
    ("truncated gzip", "the gzip stream ends early (truncated archive); refused"),
    ("not gzip", "not a readable contribution archive"),
])
def test_a_hostile_archive_gets_its_one_line_and_leaves_the_dataset_unchanged(tmp_path, packed, case, message):
    run_id, files, data, archive = packed
    path = tmp_path / "hostile.tar.gz"
    if case == "many members":
        many = {**files, **{f"extra/{i}.txt": b"" for i in range(5000)}}
        archive_of(path, run_id, many)
    elif case == "named twice":
        text = json.dumps({"format": contribution.CONTRIBUTION_FORMAT, "run_id": run_id, "machine": {},
                           "files": listing(files)})
        entry = json.dumps(listing(files)["trials.csv"])
        text = text.replace('"trials.csv": ', f'"trials.csv": {entry}, "trials.csv": ', 1)
        archive_of(path, run_id, files, text.encode())
    elif case == "long field":
        lines = files["trials.csv"].split(b"\n")
        row = lines[1].split(b",")
        row[4] = b"w" * 1_000_000  # the workload's name
        lines[1] = b",".join(row)
        archive_of(path, run_id, {**files, "trials.csv": b"\n".join(lines)})
    elif case == "deep run.json":
        info = json.loads(files["run.json"])
        text = json.dumps({**info, "notes": "DEEP"}).encode().replace(b'"DEEP"', deep_json(100_000))
        archive_of(path, run_id, {**files, "run.json": text})
    elif case == "deep manifest":
        archive_of(path, run_id, files, deep_json(100_000))
    elif case == "truncated gzip":
        path.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    else:
        path.write_bytes(b"PK\x03\x04" + bytes(2000))
    assert message in refused(data, path)


def test_a_stream_of_zeros_makes_a_valid_archive_in_a_few_kilobytes(tmp_path):
    path = zero_member_archive(tmp_path / "z.tar.gz", [("a/b.txt", b"hello")], "a/zeros", 4 * MiB)
    assert path.stat().st_size < 64 * 1024
    raw = gzip.decompress(path.read_bytes())  # the CRC and length of the trailer hold
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert [(m.name, m.size) for m in tar.getmembers()] == [("a/b.txt", 5), ("a/zeros", 4 * MiB)]
        assert tar.extractfile("a/zeros").read() == bytes(4 * MiB)


def test_a_3_gib_member_is_refused_unread_and_in_bounded_memory(tmp_path, packed, monkeypatch):
    run_id, files, data, archive = packed
    hostile = zero_member_archive(tmp_path / "hostile.tar.gz", list(members_of(archive).items()),
                                  f"{run_id}/huge.bin", 3 * GiB)
    assert hostile.stat().st_size < 8 * MiB
    # in this process: how far the expanded stream was read when the merge refused
    reached = []

    class Watched(gzip.GzipFile):
        def close(self):
            if self.fileobj is not None:
                reached.append(self.tell())
            super().close()

    monkeypatch.setattr(contribution.gzip, "GzipFile", Watched)
    with pytest.raises(HeapcostError, match="huge.bin' is not in the manifest; refused unread"):
        contribution.unpack(hostile, tmp_path / "in")
    assert reached and reached[0] < MiB
    monkeypatch.undo()
    # in a child process of its own: the merge's peak memory, as the operating system counts it
    measure = ("import json, resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, "
               "text=True); print(json.dumps([r.returncode, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    before = state(data)
    out = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "analysis", "merge", "--data", str(data),
                          str(hostile)], cwd=REPO, capture_output=True, text=True, check=True, timeout=600)
    code, stderr, peak_kib = json.loads(out.stdout)
    assert code == 2 and stderr.count("\n") == 1 and "huge.bin' is not in the manifest" in stderr, stderr
    assert peak_kib * 1024 < 200 * MiB
    assert state(data) == before


@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_the_cli_contributes_and_merges_and_answers_bad_input_with_one_line(tmp_path):
    data = empty_dataset(tmp_path)
    run = copy_run(TWO_RUNS[1], tmp_path / "src")
    r = cli("contribute", str(run), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    archive = tmp_path / "out" / f"{run.name}.heapcost-run.tar.gz"
    r = cli("merge", "--data", str(data), str(archive))
    assert r.returncode == 0 and f"{run.name}: added" in r.stdout, r.stderr
    # the bad inputs through main() in this process: the same exit code and one-line message, no second start-up
    edit_run_json(run, format="heapcost-run/9")
    r = cli_here("merge", "--data", str(data), str(run))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot be read" in r.stderr
    r = cli_here("merge", "--data", str(data), str(tmp_path / "no-such.tar.gz"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
