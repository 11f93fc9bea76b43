"""The programs the cost model (stats/cost_model.py) is checked on: programs nobody wrote for heapcost, from the
distribution, run as a user would bring them (EXTRA_WORKLOADS), on inputs this module writes.

Each program's allocation profile is taken and its cost under each configuration predicted and registered
before it is measured (publish/results/cost_check.py); the measurement is a campaign of these programs against
the baseline, in turns from outside where the program allows it (harness/alternation.py).

The inputs are generated with fixed seeds, so the same text gives the same bytes on any host; the C++ unit is
preprocessed by this host's g++ from a fixed source, so its bytes follow the host's libstdc++ headers. Each
input's sha256 is registered with the predictions and recorded by the campaign's run.json: the check compares
only runs of the same program on the same inputs.
"""
import hashlib
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError

CC1_DIR = Path("/usr/lib/gcc/x86_64-linux-gnu/12")


@dataclass(frozen=True)
class Program:
    name: str
    command: str            # {input} is the program's input file (inputs named below)
    input: str = ""         # which input: words, json, c-unit, cxx-unit
    package: str = ""       # the Debian package that ships the program
    what: str = ""


PROGRAMS = (
    Program("perl-words", "perl -ne '$w{$_}++ for split; END { print scalar(keys %w), qq(\\n) }' {input}", "words",
            "perl", "perl counting the words of a text in a hash"),
    Program("perl-json", "perl -MJSON::PP -e 'open my $f, q(<), $ARGV[0] or die; my $j = JSON::PP->new->canonical; "
            "my $d = $j->decode(do { local $/; <$f> }); print length($j->encode($d)), qq(\\n)' {input}", "json", "perl",
            "perl's own JSON module decoding and encoding a document"),
    Program("python-objects", "/usr/bin/python3 -S -c 'import sys; d = {}; [d.setdefault(w, []).append(i) for i, w in "
            "enumerate(open(sys.argv[1]).read().split())]; print(len(d), sum(map(len, d.values())))' {input}",
            "words", "python3", "python building a dict of lists from a text's words"),
    Program("sqlite-group", "sqlite3 :memory: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE "
            "x<150000) SELECT count(DISTINCT x % 977), sum(length(printf(\"%x\", x))) FROM c;'", "", "sqlite3",
            "sqlite grouping a generated series in memory"),
    Program("sqlite-index", "sqlite3 :memory: 'CREATE TABLE t(k TEXT, v INTEGER); WITH RECURSIVE c(x) AS (SELECT 1 "
            "UNION ALL SELECT x+1 FROM c WHERE x<150000) INSERT INTO t SELECT printf(\"key%07d\", (x * 7919) % 150000), "
            "x FROM c; CREATE INDEX i ON t(k); SELECT count(*), max(k) FROM t WHERE k >= \"key0075000\";'", "", "sqlite3",
            "sqlite filling a table and building an index in memory"),
    Program("gawk-count", "gawk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) k++; print k }' {input}",
            "words", "gawk", "gawk counting words in an associative array"),
    Program("jq-group", "jq -c 'group_by(.tag) | map({tag: .[0].tag, n: length, s: (map(.v) | add)})' {input}",
            "json", "jq", "jq grouping the records of a JSON document"),
    Program("gzip-text", "gzip -6 -c {input}", "words", "gzip", "gzip compressing a text (few allocations)"),
    Program("sort-text", "sort {input}", "words", "coreutils", "GNU sort ordering the lines of a text"),
    Program("xz-json", "xz -6 -c -T1 {input}", "json", "xz-utils",
            "xz compressing a JSON document (a few large blocks, allocated once, barely touched)"),
    Program("cc1-c", f"{CC1_DIR}/cc1 -quiet -O2 {{input}} -o /dev/null", "c-unit", "gcc-12",
            "GCC's C compiler proper at -O2 on a generated unit"),
    Program("cc1plus-cxx", f"{CC1_DIR}/cc1plus -fpreprocessed -quiet -O1 {{input}} -o /dev/null", "cxx-unit",
            "g++-12", "GCC's C++ compiler proper at -O1 on a unit using the standard containers"),
)
BY_NAME = {p.name: p for p in PROGRAMS}


# ---- the inputs ----

def _words(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(count)]


def words_text(lines: int = 60000) -> str:
    """A text of words (the alternation bench's, same seed and shape)."""
    rng = random.Random(2026)
    words = _words(rng, 4000)
    return "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(lines)) + "\n"


def json_text(records: int = 4000) -> str:
    """A JSON array of small records: a tag, a number, a word list."""
    rng = random.Random(2027)
    words = _words(rng, 500)
    items = []
    for i in range(records):
        tags = ",".join(f'"{rng.choice(words)}"' for _ in range(rng.randint(1, 4)))
        items.append(f'{{"id":{i},"tag":"{rng.choice(words[:60])}","v":{rng.randint(0, 10**6)},"words":[{tags}]}}')
    return "[\n" + ",\n".join(items) + "\n]\n"


def c_unit(functions: int = 30) -> str:
    """A C translation unit that includes nothing: functions of loops, switches and calls."""
    rng = random.Random(2028)
    out = ["int f0(int *a, int n) { return n ? a[0] : 0; }"]
    for i in range(1, functions):
        out.append(f"int f{i}(int *a, int n) {{ int s = {i}; for (int j = 0; j < n; j++) {{ switch ((a[j] + j) % 7) {{ "
                   f"case 0: s += a[j] * {rng.randint(2, 99)}; break; case 1: s ^= a[j] << {rng.randint(1, 9)}; break; "
                   f"case 2: s -= j * {rng.randint(1, 50)}; break; default: s += f{i - 1}(a, j & 3); }} }} return s; }}")
    return "\n".join(out) + "\n"


def cxx_source(functions: int = 6) -> str:
    """A C++ unit over the standard containers (preprocessed by g++ before it is compiled)."""
    rng = random.Random(2029)
    out = ["#include <algorithm>", "#include <map>", "#include <string>", "#include <vector>", ""]
    for i in range(functions):
        out.append(f"std::map<std::string, std::vector<int>> g{i}(const std::vector<std::string> &w) {{\n"
                   f"  std::map<std::string, std::vector<int>> m;\n"
                   f"  for (size_t j = 0; j < w.size(); j++) m[w[j] + \"{rng.randint(0, 999)}\"].push_back(int(j) * {rng.randint(2, 9)});\n"
                   f"  for (auto &kv : m) std::sort(kv.second.begin(), kv.second.end());\n"
                   f"  return m;\n}}")
    return "\n".join(out) + "\n"


def _write(path: Path, text: str) -> Path:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _preprocessed(folder: Path) -> Path:
    gxx = shutil.which("g++-12") or shutil.which("g++")
    if gxx is None:
        raise HeapcostError("the cost check's C++ unit is preprocessed by g++: install g++-12")
    src = _write(folder / "unit.cc", cxx_source())
    out = folder / "unit.ii"
    done = subprocess.run([gxx, "-E", "-P", "-std=gnu++17", str(src), "-o", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise HeapcostError(f"g++ -E failed on the cost check's C++ unit: {done.stderr.strip().splitlines()[-1:]}")
    return out


def write_inputs(folder: Path) -> dict[str, Path]:
    """The programs' inputs in `folder` (written only where their bytes differ): {input name: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"words": _write(folder / "words.txt", words_text()), "json": _write(folder / "records.json", json_text()),
            "c-unit": _write(folder / "unit.c", c_unit()), "cxx-unit": _preprocessed(folder)}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def chosen(names=None) -> list[Program]:
    if not names:
        return list(PROGRAMS)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise HeapcostError(f"no cost-check program {', '.join(unknown)}; there are: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in names]


def missing_programs(programs) -> list[str]:
    """The packages to install for the programs whose executable this host lacks."""
    def present(word):
        return Path(word).is_file() if "/" in word else shutil.which(word) is not None

    return sorted({p.package for p in programs if not present(p.command.split()[0])})


def commands(programs, inputs: dict[str, Path]) -> dict[str, str]:
    """{name: command line} with each program's input in place."""
    missing = missing_programs(programs)
    if missing:
        raise HeapcostError(f"the cost check runs programs this host lacks: install {', '.join(missing)}")
    return {p.name: p.command.replace("{input}", str(inputs[p.input])) if p.input else p.command for p in programs}


def extra_workloads(programs, inputs: dict[str, Path]) -> str:
    """The EXTRA_WORKLOADS value that brings the programs to a campaign."""
    return ", ".join(f"{name}={cmd}" for name, cmd in commands(programs, inputs).items())
