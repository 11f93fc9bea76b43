"""notebooks/security.ipynb runs under papermill on a probes.csv and writes the security_ outputs."""
import pytest

import csv
import json

import papermill as pm

from analysis.paths import REPO
from analysis.contract.schema import PROBE_COLUMNS

pytestmark = pytest.mark.paper


def test_notebook_runs_under_papermill_with_adjusted_weights(tmp_path):
    probes_csv = tmp_path / "probes.csv"
    rows = [
        {"run_id": "r", "allocator": "glibc", "probe": "double-free", "outcome": "caught", "trials": 3, "rate": 0},
        {"run_id": "r", "allocator": "jemalloc", "probe": "double-free", "outcome": "missed", "trials": 3, "rate": 1},
        {"run_id": "r", "allocator": "jemalloc", "probe": "uaf-read", "outcome": "mitigated", "trials": 3, "rate": 0},
    ]
    with open(probes_csv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "generated"
    pm.execute_notebook(str(REPO / "notebooks" / "security.ipynb"), str(tmp_path / "out.ipynb"),
                        parameters={"probes_csv": str(probes_csv), "out_dir": str(out),
                                    "weights": {"double-free": 0, "uaf-read": 1}},
                        cwd=str(REPO), kernel_name="python3", progress_bar=False)
    numbers = json.loads((out / "security_numbers.json").read_text())
    # double-free weighs nothing here: glibc is left with no weighed probe, jemalloc with uaf-read only, whose
    # 3 of 3 mitigated leave a Jeffreys posterior mean loss over (missed, late crash, mitigated, caught) of
    # (0.5 * 1 + 0.5 * late crash's loss + 3.5 * mitigated's loss) / 5
    from analysis.stats import security

    loss = (0.5 + 0.5 * security.LATE_CRASH_LOSS + 3.5 * security.MITIGATED_LOSS) / 5
    assert numbers["scores"]["glibc"] is None
    assert numbers["scores"]["jemalloc"] == pytest.approx(100 * (1 - loss), abs=0.1)
    assert (out / "security_outcomes.svg").exists() and (out / "security_scores.svg").exists()


def test_the_security_section_reads_every_probe_run_each_allocator_from_its_lead(tmp_path):
    """A probe run of a few brought allocators added after a run of the whole catalogue: the paper's security
    section shows both sets (before, it read the newest run alone and lost the catalogue's allocators)."""
    import csv
    import shutil

    from analysis.paths import DATA_DIR
    from analysis.publish.security import writer

    runs = tmp_path / "runs"
    wide, narrow = "20261130T191258Z-probe-security", "20261201T145950Z-probe-security"
    for run in (wide, narrow):
        shutil.copytree(DATA_DIR / "runs" / run, runs / run)
    of = {run: {r["allocator"] for r in csv.DictReader(open(runs / run / "probes.csv"))} for run in (wide, narrow)}
    rows = writer.reported_probe_rows(runs)
    assert {r["allocator"] for r in rows} == of[wide] | of[narrow]
    for alloc in {r["allocator"] for r in rows}:
        assert len({r["run_id"] for r in rows if r["allocator"] == alloc}) == 1, alloc
    # no probe run at all: one line that says what to run
    (tmp_path / "empty").mkdir()
    import pytest
    from analysis.errors import HeapcostError
    with pytest.raises(HeapcostError, match="no probe run with a probes.csv under .*run `make probe` first"):
        writer.reported_probe_rows(tmp_path / "empty")
