"""python -m analysis mechanism: the store sequences a poisoning free can execute, timed alone on this host, into a
run of its own (kind `mechanism`) with its machine.json and store_sequence.csv.

Seed 002's partial poison (the first 256 bytes of a freed block) is dearer than the whole block's in the gcc
build of mozjemalloc, though callgrind counts almost the same instructions per free: gcc lowers the bounded
memset to `rep stosq` with a store at each end, clang calls memset (the code census and the disassembly
excerpts of measure runs, harness/mechanisms/code_census.py). This times those sequences by themselves
(mechanisms/store_sequence.c: what each sequence is, the working sets, the blocks), pinned to one CPU as trials are,
for sizes from 16 bytes to a page. It times the sequence alone, in a tight loop: not inside mozjemalloc's free,
where the code around it may overlap with it or wait on it differently.

A mechanism run is a run kind of its own, not an option of a measure run: it has no allocator and no workload,
its unit is a block of the microbenchmark rather than a trial, it takes under a minute, and the answer belongs
to the host (machine.json), which every other run of the host can be joined with."""
import hashlib
import os
import random
import subprocess
import time
from pathlib import Path

from analysis.contract import runstore
from analysis.contract.schema import STORE_SEQUENCE_COLUMNS, STORE_SEQUENCES, WORKING_SETS
from analysis.errors import HeapcostError
from analysis.paths import RUNS_DIR
from analysis.stats.store_sequence import DIFFERENCES, POISON_BYTES

KIND = "mechanism"
LABEL = "store-sequence"
TABLE = "store_sequence.csv"
SOURCE = Path(__file__).resolve().with_name("store_sequence.c")  # beside this module
# -fno-builtin: memset stays a call; -fno-tree-loop-distribute-patterns: the store loop stays a loop
CFLAGS = ("-fno-builtin", "-fno-tree-loop-distribute-patterns")
SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MAX_SIZE = 65536
BLOCKS = 40
TARGET_US = 5000  # about this long a measurement: a group's sequences run within a few hundredths of a second
HEAP_KIB = 2048
HEADER = ["block", "warmup", "working_set", "sequence", "bytes", "repetitions", "elapsed_ns"]


def binary() -> Path:
    from analysis.harness.process.build import build_c

    return build_c("heapcost-store-sequence", [SOURCE], cflags=CFLAGS)


def _items(value, what: str) -> list[str]:
    items = [v.strip() for v in str(value or "").split(",") if v.strip()]
    if len(set(items)) != len(items):
        raise HeapcostError(f"{what} names a value twice: {value!r}")
    return items


def parse_sizes(value) -> list[int]:
    """--sizes 16,256,...: bytes a sequence stores, each a multiple of 16 from 16 to 65536 (default SIZES)."""
    items = _items(value, "--sizes")
    if not items:
        return list(SIZES)
    sizes = []
    for item in items:
        try:
            n = int(item)
        except ValueError:
            raise HeapcostError(f"--sizes: {item!r} is not a whole number of bytes") from None
        if not 16 <= n <= MAX_SIZE or n % 16:
            raise HeapcostError(f"--sizes: {n} is not a multiple of 16 from 16 to {MAX_SIZE} bytes")
        sizes.append(n)
    if len(set(sizes)) != len(sizes):
        raise HeapcostError(f"--sizes names a size twice: {value!r}")
    return sorted(sizes)


def parse_names(value, known, what: str) -> list[str]:
    items = _items(value, what)
    unknown = [v for v in items if v not in known]
    if unknown:
        raise HeapcostError(f"unknown {what} {', '.join(unknown)}; valid: {', '.join(known)}")
    return [v for v in known if v in items] or list(known)


def positive_int(value, what: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise HeapcostError(f"{what} must be a whole number of at least 1, not {value!r}")
    return number


def command(program, sizes, blocks, target_us, heap_kib, seed, cpu=None, sequences=(), working_sets=(),
            repetitions=None) -> list[str]:
    argv = [str(program), "--sizes", ",".join(map(str, sizes)), "--blocks", str(blocks), "--target-us",
            str(target_us), "--heap-kib", str(heap_kib), "--seed", str(seed)]
    if sequences:
        argv += ["--sequences", ",".join(sequences)]
    if working_sets:
        argv += ["--working-sets", ",".join(working_sets)]
    if repetitions:
        argv += ["--repetitions", str(repetitions)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    return argv


def parse_output(text: str, expected_rows: int | None = None) -> list[dict]:
    """The program's rows as dicts of HEADER (numbers as int): its comment line, its header, a row per
    measurement and `# done <rows>` last. Anything else, a count that differs or a missing end is a HeapcostError
    naming the line."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# heapcost-store-sequence "):
        raise HeapcostError("the store-sequence program printed no heading line: not its output")
    if len(lines) < 2 or lines[1].split("\t") != HEADER:
        raise HeapcostError(f"the store-sequence output's line 2 is not its header ({HEADER})")
    rows, done = [], None
    for number, line in enumerate(lines[2:], start=3):
        if line.startswith("# done "):
            done = line[len("# done "):].strip()
            if number != len(lines):
                raise HeapcostError(f"the store-sequence output goes on after its end (line {number})")
            break
        fields = line.split("\t")
        if len(fields) != len(HEADER):
            raise HeapcostError(f"store-sequence output line {number}: {len(fields)} fields, expected {len(HEADER)}")
        row = dict(zip(HEADER, fields))
        try:
            for key in ("block", "warmup", "bytes", "repetitions", "elapsed_ns"):
                row[key] = int(row[key])
        except ValueError:
            raise HeapcostError(f"store-sequence output line {number}: {key} {row[key]!r} is not a whole number") from None
        if row["sequence"] not in STORE_SEQUENCES or row["working_set"] not in WORKING_SETS:
            raise HeapcostError(f"store-sequence output line {number}: unknown sequence or working set "
                                f"({row['sequence']!r}, {row['working_set']!r})")
        if row["repetitions"] < 1 or row["elapsed_ns"] < 0 or row["warmup"] not in (0, 1):
            raise HeapcostError(f"store-sequence output line {number}: repetitions, elapsed_ns or warmup out of range")
        rows.append(row)
    if done is None:
        raise HeapcostError("the store-sequence output has no end line: the program was cut short")
    if done != str(len(rows)):
        raise HeapcostError(f"the store-sequence output says {done} rows and holds {len(rows)}")
    if expected_rows is not None and len(rows) != expected_rows:
        raise HeapcostError(f"the store-sequence program measured {len(rows)} cells, expected {expected_rows}")
    return rows


def table_rows(rows: list[dict], run_id: str) -> list[dict]:
    """The program's rows as store_sequence.csv's: run id, order, ns per sequence (fixed-point)."""
    return [{"run_id": run_id, "seq": i, **r, "ns": f"{r['elapsed_ns'] / r['repetitions']:.3f}"}
            for i, r in enumerate(rows)]


def source_sha256() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def write_table(path: Path, rows: list[dict]) -> None:
    import csv

    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=STORE_SEQUENCE_COLUMNS, extrasaction="raise")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def measure(sizes=None, blocks=BLOCKS, target_us=TARGET_US, heap_kib=HEAP_KIB, sequences="", working_sets="",
            seed=None, pin="auto", force=None, out=None, runs_dir=None, repetitions=None, run=subprocess.run) -> Path:
    """One mechanism run: the program pinned to the trial CPU, its rows in the run's store_sequence.csv."""
    from analysis.harness.process import launcher, machine, quiet
    from analysis.harness.process.blocks import parse_seed

    sizes = parse_sizes(sizes)
    blocks = positive_int(blocks, "--blocks")
    target_us = positive_int(target_us, "--target-us")
    heap_kib = positive_int(heap_kib, "--heap-kib")
    if heap_kib * 1024 < 16 * max(sizes):
        raise HeapcostError(f"--heap-kib {heap_kib} holds fewer than 16 blocks of {max(sizes)} bytes")
    sequences = parse_names(sequences, STORE_SEQUENCES, "sequence(s)")
    working_sets = parse_names(working_sets, WORKING_SETS, "working set(s)")
    repetitions = positive_int(repetitions, "--repetitions") if repetitions not in (None, "") else None
    cpu = launcher.parse_pin(pin)
    params = {"sizes": sizes, "blocks": blocks, "target_us": target_us, "heap_kib": heap_kib,
              "sequences": sequences, "working_sets": working_sets, "pin": str(pin or "auto"),
              "cflags": list(CFLAGS), "source_sha256": source_sha256(),
              **({"repetitions": repetitions} if repetitions else {}),
              **({"seed": parse_seed(seed)} if seed not in (None, "") else {})}
    program = binary()
    # the campaign lock lives where the run goes: beside the other runs, or in the folder holding --out
    runs_dir = Path(runs_dir or (Path(out).absolute().parent if out else RUNS_DIR))
    with quiet.CampaignLock(runs_dir, force) as lock:
        run_dir, info = runstore.start_run(KIND, LABEL, params, runs_dir=runs_dir, run_dir=out or None)
        try:
            info.setdefault("quiet", []).append({"utc": runstore.utc_now(), **lock.record})
            if info.get("seed") is None:
                info["seed"] = params.get("seed", random.SystemRandom().randrange(2**31))
            if not (run_dir / "machine.json").exists():
                runstore.write_json_atomic(run_dir / "machine.json", machine.describe_machine(["libc6", "gcc-12"]))
            argv = command(program, sizes, blocks, target_us, heap_kib, info["seed"], cpu, sequences, working_sets,
                           repetitions)
            expected = (blocks + 1) * len(sizes) * len(sequences) * len(working_sets)
            with launcher.pinned(cpu) as pinning:
                info.setdefault("pinning", []).append({"utc": runstore.utc_now(), **pinning})
                runstore.write_json_atomic(run_dir / "run.json", info)
                started = time.monotonic()
                proc = run(argv, capture_output=True, text=True)
                elapsed = time.monotonic() - started
            if proc.returncode != 0:
                first = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
                raise HeapcostError(f"the store-sequence program failed: {first}")
            rows = parse_output(proc.stdout, expected)
            write_table(run_dir / TABLE, table_rows(rows, run_dir.name))
        except BaseException:
            if not (run_dir / TABLE).exists():
                runstore.discard_run(run_dir)
            raise
        runstore.add_elapsed(run_dir, info, elapsed)
        runstore.finish_run(run_dir, "complete")
    return run_dir


def summary_lines(run_dir: Path) -> list[str]:
    """The run's cells and the differences at the poison's size, as lines to print."""
    from analysis.contract.schema import read_table
    from analysis.stats import store_sequence as S

    rows = read_table(Path(run_dir) / TABLE)
    cells = S.cells(rows)
    lines = [f"{'working set':<11} {'bytes':>6}  {'sequence':<14} ns per sequence [95%]"]
    for r in cells.itertuples():
        lines.append(f"{r.working_set:<11} {r.bytes:>6}  {r.sequence:<14} {r.ns:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]")
    for r in S.differences(rows, DIFFERENCES, POISON_BYTES).itertuples():
        lines.append(f"{r.working_set}, {r.bytes} bytes: {r.sequence} - {r.minus} = {r.ns:.2f} ns "
                     f"[{r.ci_low:.2f}, {r.ci_high:.2f}] over {r.n_blocks} blocks")
    return lines


# ---------------------------------------------------------------------------------------- CLI
def add_arguments(parser):
    parser.add_argument("--sizes", default="", help=f"bytes a sequence stores, multiples of 16 "
                        f"(default {','.join(map(str, SIZES))})")
    parser.add_argument("--blocks", default=str(BLOCKS), help=f"measured blocks after the warm-up (default {BLOCKS})")
    parser.add_argument("--target-us", default=str(TARGET_US), help=f"microseconds a measurement lasts about "
                        f"(default {TARGET_US})")
    parser.add_argument("--repetitions", default="", help="sequences a measurement runs, the same for every cell "
                        "(default: calibrated to --target-us)")
    parser.add_argument("--heap-kib", default=str(HEAP_KIB), help=f"KiB of the heap working set (default {HEAP_KIB})")
    parser.add_argument("--sequences", default="", help=f"default all: {', '.join(STORE_SEQUENCES)}")
    parser.add_argument("--working-sets", default="", help=f"default both: {', '.join(WORKING_SETS)}")
    parser.add_argument("--seed", default=None, help="seed of the random orders (default: random, recorded)")
    parser.add_argument("--pin", default="auto", help="CPU the program runs on: auto (the last CPU), none, or a number")
    parser.add_argument("--force", action="store_true", help="measure even on a busy machine or beside a campaign "
                        "(recorded in run.json)")
    parser.add_argument("--out", default="", help="run directory (default: a new one in data/runs/)")


def run(args) -> int:
    run_dir = measure(sizes=args.sizes, blocks=args.blocks, target_us=args.target_us, heap_kib=args.heap_kib,
                      sequences=args.sequences, working_sets=args.working_sets, seed=args.seed, pin=args.pin,
                      force="1" if args.force else None, out=args.out or None, repetitions=args.repetitions)
    print("\n".join(summary_lines(run_dir)))
    print(run_dir)
    return 0
