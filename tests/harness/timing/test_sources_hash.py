"""measure.sources_sha256, which a campaign records and resumes by, is the same wherever the harness's C helpers
lie: their file names and bytes, in name order, then the workload sources, the mechanisms' and the workloads'
C sources beside their modules, the catalogue and builtin.py, as it was computed when the helpers lay together
in one folder."""
import hashlib

from analysis.harness.timing.measure import sources_sha256
from analysis.paths import CATALOG_PATH, REPO, WORKLOADS_DIR

HARNESS = REPO / "analysis" / "harness"
HELPERS = ("alternate.c", "child_io.h", "cpu_load.c", "free_poison_check.c", "launcher.c", "lockstep.c", "mallocwho.c")
# sha256 over the seven helpers (name, NUL, bytes, in name order): moving them leaves it as it is; changing one
# changes what campaigns record, and this value with it, in the same commit (last: the two drivers of two
# commands sharing their sides' options and command-line split through child_io.h)
HELPERS_SHA256 = "e8a87ed4e5a581da5feaae07d6f5fb3ad0b9c45ad68e05d8fce7830590fd8705"


def _helpers() -> list:
    found = {p.name: p for p in HARNESS.rglob("*") if p.name in HELPERS and p.is_file()}
    assert sorted(found) == sorted(HELPERS), found
    return [found[name] for name in sorted(HELPERS)]


def test_the_helpers_are_unchanged_and_hash_as_they_did_in_one_folder():
    h = hashlib.sha256()
    for path in _helpers():
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    assert h.hexdigest() == HELPERS_SHA256
    whole = hashlib.sha256()
    files = _helpers() + sorted(p for p in WORKLOADS_DIR.rglob("*") if p.is_file())
    files += sorted((HARNESS / "mechanisms").glob("*.c")) + sorted((HARNESS / "workloads").glob("*.c"))
    for path in [*files, CATALOG_PATH, HARNESS / "workloads" / "builtin.py"]:
        whole.update(path.name.encode() + b"\0" + path.read_bytes())
    assert sources_sha256() == whole.hexdigest()[:16]
