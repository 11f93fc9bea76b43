"""Notebooks stay clean in git: the nbstrip clean filter (analysis/harness/nbstrip/), set up by the
Makefile, drops what a kernel leaves in a notebook, and leaves the committed notebooks as they are."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from analysis.paths import REPO
from analysis.harness import nbstrip

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def executed(text: str) -> str:
    """The notebook as JupyterLab saves it after a run: outputs, counts, widget state, UI metadata."""
    nb = json.loads(text)
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2", "mimetype": "text/x-python"}
    for i, cell in enumerate(nb["cells"]):
        cell["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
        cell["metadata"]["scrolled"] = True
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["a lot\n"]}]
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebooks_are_what_the_filter_makes(path):
    text = path.read_text()
    assert nbstrip.clean(text) == text, f"{path.name} is not stripped: run make git-filter, then git add it"
    assert nbstrip.clean(executed(text)) == text


def test_the_filter_passes_what_is_not_a_notebook():
    assert nbstrip.clean("not json") == "not json"
    assert nbstrip.clean('{"a": 1}') == '{"a": 1}'


def makefile_filter_command() -> str:
    text = (REPO / "Makefile").read_text()
    assert re.search(r"^venv: .*git-filter", text, re.M) and re.search(r"^lab: .*git-filter", text, re.M)
    return re.search(r"^NBSTRIP := (.+)$", text, re.M).group(1).strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_stores_a_run_notebook_without_its_outputs(tmp_path):
    """A clone set up as `make git-filter` does: a notebook saved with outputs is clean for git status,
    and what git add stores has no output."""
    command = makefile_filter_command()
    assert command == "python3 -m analysis.harness.nbstrip"
    assert "notebooks/*.ipynb filter=nbstrip" in (REPO / ".gitattributes").read_text()
    env = dict(os.environ, PYTHONPATH=str(REPO), GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *a], cwd=tmp_path,
                                    env=env, capture_output=True, text=True, check=True).stdout
    git("init", "-q")
    git("config", "filter.nbstrip.clean", command.replace("python3", sys.executable, 1))
    shutil.copy(REPO / ".gitattributes", tmp_path / ".gitattributes")
    (tmp_path / "notebooks").mkdir()
    source = (REPO / "notebooks" / "explore.ipynb").read_text()
    nb = tmp_path / "notebooks" / "explore.ipynb"
    nb.write_text(source)
    git("add", ".")
    git("commit", "-qm", "clean")
    nb.write_text(executed(source))  # a run saved with its outputs (by a tool other than `make lab`)
    assert git("diff") == ""  # git status says modified (size changed) until the index is refreshed
    git("add", ".")
    assert git("show", ":notebooks/explore.ipynb") == source
    assert git("status", "--porcelain") == ""


def test_the_lab_saves_notebooks_stripped():
    """make lab passes the pre-save hook: what JupyterLab writes is the committed source, git stays clean."""
    assert "--ContentsManager.pre_save_hook=analysis.harness.nbstrip.pre_save_hook" in (REPO / "Makefile").read_text()
    source = (REPO / "notebooks" / "explore.ipynb").read_text()
    model = {"type": "notebook", "content": json.loads(executed(source))}
    nbstrip.pre_save_hook(model=model, path="explore.ipynb", contents_manager=None)
    assert nbstrip.dumps(model["content"]) == source
    other = {"type": "file", "content": "x"}
    nbstrip.pre_save_hook(model=other, path="a.txt", contents_manager=None)
    assert other["content"] == "x"


def _papermill_residue(text: str) -> str:
    """What a papermill run leaves besides the injected-parameters cell: its metadata on the notebook and on
    every cell (start and end times, status), `"tags": []` on every untagged cell, outputs."""
    nb = json.loads(text)
    nb["metadata"]["papermill"] = {"parameters": {}, "duration": 1.5, "version": "2.7.0"}
    for cell in nb["cells"]:
        cell["metadata"].setdefault("tags", [])
        cell["metadata"]["papermill"] = {"duration": 0.01, "status": "completed", "exception": False}
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["out\n"]}]
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_run_by_papermill_and_saved_in_the_lab_is_the_committed_source(path, tmp_path):
    """papermill tags every cell (`"tags": []`) and inserts a cell with the run's parameters: a notebook
    saved through `make lab` after such a run must still be the committed one, for git status."""
    import papermill

    from analysis.publish.render.notebook import default_parameters

    name, value = next(iter(default_parameters(path).items()))
    prepared = tmp_path / path.name
    papermill.execute_notebook(str(path), str(prepared), parameters={name: value}, prepare_only=True,
                               progress_bar=False)
    text = _papermill_residue(prepared.read_text())
    assert '"tags": []' in text and "injected-parameters" in text  # the residue is there to be stripped
    source = path.read_text()
    assert nbstrip.clean(text) == source
    model = {"type": "notebook", "content": json.loads(text)}
    nbstrip.pre_save_hook(model=model, path=path.name, contents_manager=None)
    assert nbstrip.dumps(model["content"]) == source


def test_tags_a_cell_was_given_on_purpose_are_kept():
    nb = {"cells": [{"cell_type": "code", "source": "x = 1\n", "metadata": {"tags": ["parameters"]}},
                    {"cell_type": "markdown", "source": "text", "metadata": {"tags": []}}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    cells = json.loads(nbstrip.clean(json.dumps(nb)))["cells"]
    assert [c["metadata"] for c in cells] == [{"tags": ["parameters"]}, {}]
