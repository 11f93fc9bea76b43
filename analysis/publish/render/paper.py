"""`python -m analysis paper`: run the analysis notebooks over a dataset, then compile the paper.

First the dataset's description is brought up to date: a run measured since joins datapackage.json and
the codebook (analysis.publish.dataset.archive.refresh_description), so the checksum the paper prints is that of
the archive `make dataset` writes from the same files. The notebooks (noise, literature, security,
results; those present) run under papermill and write their figures and numbers to <out>/generated/, unless
the products there were made from the same inputs (the dataset's files and the package's, by sha256): those are
kept, so a fresh clone compiles the committed products, and --rerun-all makes them all again. This
command adds generated/paper_numbers.json (the dataset's version and archive checksum, and the list of
generated files, which the paper consults before reading an optional one), then compiles paper.typ with
Typst to paper.pdf and paper.html. Typst runs with its embedded fonts only and no document date, so the
same data gives the same bytes.
"""
import functools
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from analysis import __version__
from analysis.errors import HeapcostError
from analysis.paths import BUILD_DIR, DATA_DIR, REPO

PAPER_DIR = REPO / "paper"
NOTEBOOKS = ["noise", "literature", "security", "primitives", "results"]
BACKGROUND = {"noise"}
# Every notebook's products are kept while nothing it reads has changed: a sha256 of its inputs sits beside them in
# generated/.<name>.inputs (--rerun-all runs them anyway). A notebook that reads nothing of the dataset (the
# simulation study) names the files it runs, with its parameters. One that reads the dataset takes as inputs every
# file of the dataset it is given and every file of the package it could consult (READ_BY_ALL), so that a fresh
# clone compiles the paper from the products committed with the data and code that made them, and any change to
# either makes them again.
DATA_FREE = {"noise": ("analysis/stats/simulate.py", "analysis/stats/compare.py", "analysis/stats/estimators.py", "analysis/stats/noise.py",
                       "analysis/publish/render/figures.py", "analysis/publish/render/products.py", "analysis/publish/debates/simulation.py",
                       "analysis/publish/debates/pool.py", "analysis/stats/random_effects.py", "analysis/stats/equivalence.py",
                       "analysis/stats/prediction.py",
                       "analysis/stats/primitives.py", "requirements.txt")}
READ_BY_ALL = ("analysis", "notebooks", "cost_predictions", "workloads", "probes", "patches", "bench", "workflow",
               "allocators.toml", "debates.toml", "predictions.toml", "security_weights.toml", "requirements.txt",
               "pyproject.toml", "CITATION.cff")
PATH_PARAMETERS = {"data_dir", "runs_dir", "literature_dir", "figures_csv", "out_dir"}  # their files are the inputs
SOURCES = ["paper.typ", "common.typ", "supplement.typ", "refs.bib"]
SUPPLEMENT_REFS = "supplement_refs.json"  # {label: "Table S3"}: the supplement's numbers the paper cites


def notebook_params(name: str, defaults: dict, data_dir: Path, generated: Path) -> dict:
    """The parameters that point a notebook at the dataset and the output directory. Notebooks name
    them data_dir / runs_dir / literature_dir / figures_csv / out_dir; the ones a notebook does not declare
    are not passed (a notebook's probes_csv stays empty: every probe run of runs_dir)."""
    wanted = {"data_dir": str(data_dir), "runs_dir": str(data_dir / "runs"), "literature_dir": str(data_dir / "literature"),
              "figures_csv": str(data_dir / "literature" / "figures.csv"), "out_dir": str(generated)}
    return {k: v for k, v in wanted.items() if k in defaults}


def _files(root: Path, entries) -> list[tuple[str, Path]]:
    """(path relative to root, path) of every file under root's `entries` (files or folders; "" for all of root),
    sorted, without hidden files and Python's caches."""
    found = []
    for entry in entries:
        top = root / entry
        paths = [top] if top.is_file() else top.rglob("*") if top.is_dir() else []
        for path in paths:
            rel = path.relative_to(root)
            if path.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                found.append((rel.as_posix(), path))
    return sorted(found)


def _update(h, rel: str, path: Path) -> None:
    from analysis.harness.nbstrip import clean

    raw = path.read_bytes()
    if rel.endswith(".ipynb"):  # the notebook's source, not what a kernel in the lab left in it
        raw = clean(raw.decode("utf-8")).encode("utf-8")
    h.update(rel.encode() + b"\0" + raw + b"\0")


def _listing(root: Path, entries) -> tuple:
    """What `_files` finds, with each file's size and time: a changed file changes it."""
    return tuple((rel, path.stat().st_size, path.stat().st_mtime_ns) for rel, path in _files(root, entries))


@functools.lru_cache(maxsize=4)
def _shared_digest(repo: Path, data_dir: Path, listing: tuple) -> str:
    h = hashlib.sha256()
    for rel, path in _files(repo, READ_BY_ALL):
        _update(h, rel, path)
    h.update(b"dataset\0")
    for rel, path in _files(data_dir, [""]):
        _update(h, rel, path)
    return h.hexdigest()


def dataset_digest(data_dir: Path) -> str:
    """A sha256 of every file of the package a notebook could consult (READ_BY_ALL) and of every file of the
    dataset, by their paths relative to each: the same on any host and in any clone. Read once a process while no
    file's size or time changes."""
    data_dir = Path(data_dir).resolve()
    return _shared_digest(REPO, data_dir, (_listing(REPO, READ_BY_ALL), _listing(data_dir, [""])))


def inputs_digest(name: str, params: dict, data_dir: Path | None = None) -> str:
    """The sha256 of what notebook `name` reads with `params`: for a data-free notebook its own files (DATA_FREE),
    for the others the package and every file of `data_dir` (dataset_digest)."""
    h = hashlib.sha256()
    if name in DATA_FREE:
        for rel in (f"notebooks/{name}.ipynb",) + DATA_FREE[name]:
            _update(h, rel, REPO / rel)
        h.update(json.dumps({k: v for k, v in params.items() if k != "out_dir"}, sort_keys=True).encode())
        return h.hexdigest()
    if data_dir is None:
        raise HeapcostError(f"notebook {name}.ipynb reads the dataset: its inputs need the dataset's directory")
    _update(h, f"notebooks/{name}.ipynb", REPO / "notebooks" / f"{name}.ipynb")
    h.update(dataset_digest(data_dir).encode())
    h.update(json.dumps({k: v for k, v in params.items() if k not in PATH_PARAMETERS}, sort_keys=True).encode())
    return h.hexdigest()


def stamp_path(generated: Path, name: str) -> Path:
    return generated / f".{name}.inputs"


def kept_products(generated: Path, names, data_dir: Path) -> dict[str, dict[str, bytes]]:
    """The products of the notebooks whose inputs have not changed (inputs_digest): {name: {file: bytes}}."""
    from analysis.publish.render import notebook

    kept = {}
    for name in names:
        if not (notebook.NOTEBOOKS_DIR / f"{name}.ipynb").is_file():
            continue
        stamp = stamp_path(generated, name)
        params = notebook_params(name, notebook.default_parameters(notebook.NOTEBOOKS_DIR / f"{name}.ipynb"),
                                 data_dir, generated)
        products = sorted(generated.glob(f"{name}_*"))
        if products and stamp.is_file() and stamp.read_text().strip() == inputs_digest(name, params, data_dir):
            kept[name] = {p.name: p.read_bytes() for p in products + [stamp]}
    return kept


def run_notebooks(data_dir: Path, generated: Path, names=NOTEBOOKS, log=print, kept=()) -> list[str]:
    """Run the analysis notebooks over the dataset (their figures are byte-stable: analysis.publish.render.figures)."""
    from analysis.publish.render import notebook

    out_dir = BUILD_DIR / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)

    ran, background = [], []
    present = []
    for name in names:
        path = notebook.NOTEBOOKS_DIR / f"{name}.ipynb"
        if not path.is_file():
            log(f"paper: notebooks/{name}.ipynb does not exist; its part of the paper says so")
            continue
        if name in kept:
            log(f"paper: {name}.ipynb: its inputs are unchanged, so its products are kept (--rerun-all runs it)")
            ran.append(name)
            continue
        present.append((name, path, notebook_params(name, notebook.default_parameters(path), data_dir, generated)))
    # what each reads, taken before it runs: a file changed meanwhile makes it run again next time
    digests = {name: inputs_digest(name, params, data_dir) for name, _, params in present}
    # the simulation study does not read the dataset and is the slowest: it runs on the other core meanwhile
    for name, path, params in present:
        if name in BACKGROUND:
            cmd = [sys.executable, "-m", "analysis", "notebook", name] + [f"{k}={v}" for k, v in params.items()]
            background.append((name, time.monotonic(), subprocess.Popen(
                cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    try:
        for name, path, params in present:
            if name in BACKGROUND:
                continue
            t0 = time.monotonic()
            notebook.execute(path, out_dir / f"paper-{name}.ipynb", params, echo=False)
            log(f"paper: ran {name}.ipynb in {time.monotonic() - t0:.1f} s")
            ran.append(name)
    finally:
        for name, t0, proc in background:
            _, err = proc.communicate()
            if proc.returncode != 0:
                last = [line for line in err.splitlines() if line.strip()][-1:] or ["no message"]
                raise HeapcostError(f"notebook {name}.ipynb failed: {last[0]}")
            log(f"paper: ran {name}.ipynb in {time.monotonic() - t0:.1f} s (alongside the others)")
            ran.append(name)
    for name, digest in digests.items():
        stamp_path(generated, name).write_text(digest + "\n")
    return ran


def write_paper_numbers(data_dir: Path, generated: Path, notebooks: list[str]) -> dict:
    from analysis.publish.dataset import archive

    numbers = {
        "dataset": {"name": "heapcost-dataset", "version": __version__, "archive": archive.archive_name(),
                    "sha256": archive.checksum(data_dir)},
        "notebooks": sorted(notebooks),
        "files": sorted(p.name for p in generated.iterdir()
                        if p.is_file() and p.name != "paper_numbers.json" and not p.name.startswith(".")),
    }
    (generated / "paper_numbers.json").write_text(json.dumps(numbers, indent=2, sort_keys=True) + "\n")
    return numbers


TAGGING_BUGS = ("internal error: parent group", "tags weren't properly closed")


def supplement_refs(out_dir: Path) -> dict:
    """{label: "Table S3" | "Figure S2" | "Section S4"} of every labelled table, figure and section of the
    supplement, from its own numbering (the metadata its show rules leave), written into generated/ for the
    paper to cite: the two documents are compiled apart, so the paper cannot reference the supplement's labels."""
    import typst

    source = out_dir / "supplement.typ"
    if not source.is_file():
        return {}
    try:
        found = json.loads(typst.query(str(source), "<supp-ref>", field="value", root=str(out_dir),
                                       ignore_system_fonts=True))
    except typst.TypstError as exc:
        message = " ".join((getattr(exc, "message", "") or str(exc)).split())
        raise HeapcostError(f"typst could not compile {source}: {message}") from None
    refs = {item["key"]: item["text"] for item in found}
    (out_dir / "generated" / SUPPLEMENT_REFS).write_text(json.dumps(refs, indent=2, sort_keys=True) + "\n")
    return refs


def compile_paper(out_dir: Path) -> tuple[Path, Path]:
    """paper.pdf and paper.html, then the supplement's supplement.pdf and supplement.html beside them."""
    pdf, html = _compile(out_dir, "paper")
    if (out_dir / "supplement.typ").is_file():
        _compile(out_dir, "supplement")
    return pdf, html


def _compile(out_dir: Path, name: str) -> tuple[Path, Path]:
    import typst

    source = out_dir / f"{name}.typ"
    compiler = typst.Compiler(str(source), root=str(out_dir), ignore_system_fonts=True)
    pdf, html = out_dir / f"{name}.pdf", out_dir / f"{name}.html"
    try:
        try:
            compiler.compile(output=str(pdf), format="pdf")
        except typst.TypstError as exc:
            # Typst 0.15's tagged PDF (the accessibility tags) fails with an internal error on some page
            # breaks ("parent group", "tags weren't properly closed": a known bug that depends on where the
            # pages break, not on the source): the paper is then written without tags, and says so here.
            if not any(m in str(exc) for m in TAGGING_BUGS):
                raise
            print(f"paper: typst's tagged PDF hit its page-break bug; {name}.pdf is written without PDF tags")
            compiler.compile(output=str(pdf), format="pdf", pdf_tags=False)
        compiler.compile(output=str(html), format="html")
    except typst.TypstError as exc:
        where = (getattr(exc, "diagnostic", "") or "").strip().splitlines()[:1]
        message = " ".join((getattr(exc, "message", "") or str(exc)).split())
        raise HeapcostError(f"typst could not compile {source}: {message}"
                            + (f" ({where[0].strip()})" if where and message not in where[0] else "")) from None
    return pdf, html


def build(data_dir: Path = DATA_DIR, out_dir: Path = PAPER_DIR, notebooks=NOTEBOOKS, log=print,
          rerun_all: bool = False) -> tuple[Path, Path]:
    data_dir, out_dir = Path(data_dir).resolve(), Path(out_dir).resolve()
    if not (data_dir / "runs").is_dir():
        raise HeapcostError(f"{data_dir} has no runs/ directory; give a dataset directory (default data)")
    from analysis.publish.dataset import archive

    for path in archive.refresh_description(data_dir, tables=False):
        log(f"paper: rewrote {path} (the dataset's description now covers every file of {data_dir.name}/)")
    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir != PAPER_DIR.resolve():
        for name in SOURCES:
            if (PAPER_DIR / name).is_file():
                shutil.copyfile(PAPER_DIR / name, out_dir / name)
    generated = out_dir / "generated"
    kept = {} if rerun_all or not generated.is_dir() else kept_products(generated, notebooks, data_dir)
    if set(notebooks) == set(NOTEBOOKS) and generated.is_dir():
        # every product is made again (or kept by its inputs' digest): nothing stale may survive
        shutil.rmtree(generated)
    generated.mkdir(exist_ok=True)
    for files in kept.values():
        for fname, blob in files.items():
            (generated / fname).write_bytes(blob)
    ran = run_notebooks(data_dir, generated, notebooks, log, kept)
    if (out_dir / "supplement.typ").is_file():  # listed first, so the supplement's own build sees it too
        (generated / SUPPLEMENT_REFS).write_text("{}\n")
    write_paper_numbers(data_dir, generated, ran)
    supplement_refs(out_dir)
    if out_dir == PAPER_DIR.resolve():  # the repository's own paper: its map in docs/, read from its source
        from analysis.publish.render import paper_map

        if paper_map.write(NOTEBOOKS):
            log(f"paper: rewrote {paper_map.PAPER_MAP.relative_to(REPO)} from paper/paper.typ")
    return compile_paper(out_dir)


def add_arguments(parser):
    parser.add_argument("--data", default=str(DATA_DIR), help="the dataset directory (default data)")
    parser.add_argument("--out", default=str(PAPER_DIR),
                        help="where generated/, paper.pdf and paper.html go (default paper/)")
    parser.add_argument("--rerun-all", action="store_true",
                        help="run every notebook even when its inputs are unchanged (by default their products are kept)")
    parser.add_argument("--notebooks", default=",".join(NOTEBOOKS),
                        help=f"comma-separated notebooks to run first (default {','.join(NOTEBOOKS)}; empty: none)")


def run(args) -> int:
    names = [n for n in args.notebooks.split(",") if n]
    unknown = [n for n in names if n not in NOTEBOOKS]
    if unknown:
        raise HeapcostError(f"unknown notebook(s) {', '.join(unknown)}; valid: {', '.join(NOTEBOOKS)}")
    t0 = time.monotonic()
    pdf, html = build(Path(args.data), Path(args.out), names, rerun_all=args.rerun_all)
    print(f"{pdf}\n{html}\n({time.monotonic() - t0:.0f} s)")
    return 0
