import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Tests run campaigns on a machine that is busy by design (the tests themselves): the quiet-machine check
# (analysis/harness/quiet.py) is forced off here; tests of the check itself pass force explicitly.
os.environ.setdefault("HEAPCOST_FORCE", "1")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """A private data/runs for one test: the published dataset is never touched."""
    d = tmp_path / "runs"
    d.mkdir()
    monkeypatch.setenv("HEAPCOST_RUNS_DIR", str(d))
    return d


def cli(*args, env_extra=None, timeout=600):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=timeout)
