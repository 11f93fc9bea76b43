"""A git clean filter that keeps notebooks/ free of outputs: `git add` and `git status` see a notebook
as it is without what a kernel left in it (outputs, execution counts, widget state, per-cell UI state) or
what papermill left (its metadata, empty tags on every cell, the cell of injected parameters).

`make venv` (and `make lab`) install it:
    git config filter.nbstrip.clean "python3 -m analysis.harness.nbstrip"
with `notebooks/*.ipynb filter=nbstrip` in .gitattributes. It reads a notebook on stdin and writes the
stripped one on stdout; anything it cannot read as a notebook passes through unchanged. The stripped form
is canonical (the layout nbformat writes, sources as lists of lines) so a notebook saved by JupyterLab and
the committed one compare equal. Only the standard library: git runs it with any python3.

git compares sizes before it runs a filter, so a notebook saved with outputs shows as modified in
`git status` (while `git diff` is empty) until `git add` refreshes the index. `make lab` therefore also
strips on save (`pre_save_hook`, a Jupyter server hook): a notebook's outputs live in the lab session,
the file on disk stays the committed source and `git status` stays clean.

Tooling, not measuring: a room of its own in the harness only because clones' git config and the Makefile run it
by this module path; it imports nothing of the package.
"""
import json
import sys

KEEP_CELL_METADATA = ("tags",)  # papermill's "parameters" tag lives here
KEEP_METADATA = ("kernelspec",)
# papermill's residue besides outputs and its metadata: every cell gets `"tags": []`, and a cell tagged
# this way holds the run's parameters (it is not part of the source: the defaults are in "parameters")
INJECTED_PARAMETERS_TAG = "injected-parameters"


def lines(source) -> list[str]:
    text = "".join(source) if isinstance(source, list) else str(source)
    return text.splitlines(keepends=True)


def strip(nb: dict) -> dict:
    nb = dict(nb)
    nb["metadata"] = {k: v for k, v in (nb.get("metadata") or {}).items() if k in KEEP_METADATA}
    cells = []
    for cell in nb.get("cells") or []:
        cell = dict(cell)
        metadata = cell.get("metadata") or {}
        if INJECTED_PARAMETERS_TAG in (metadata.get("tags") or ()):
            continue
        cell["metadata"] = {k: v for k, v in metadata.items() if k in KEEP_CELL_METADATA and v}
        cell["source"] = lines(cell.get("source", ""))
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
    nb["cells"] = cells
    return nb


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def clean(text: str) -> str:
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    if not isinstance(nb, dict) or "cells" not in nb:
        return text
    return dumps(strip(nb))


def pre_save_hook(model, **_):
    """Jupyter server ContentsManager.pre_save_hook: the notebook is saved stripped."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        clean_nb = strip(model["content"])
        model["content"].clear()
        model["content"].update(clean_nb)


def main() -> int:
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        sys.stdout.buffer.write(data)
        return 0
    sys.stdout.buffer.write(clean(text).encode("utf-8"))
    return 0
