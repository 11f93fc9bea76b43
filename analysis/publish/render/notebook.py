"""Run a notebook under papermill: `python -m analysis notebook NAME [PARAM=VALUE ...]`.

Parameters are checked against the notebook's `parameters` cell before anything runs. Measurement
notebooks (measure) are stored executed inside the run directory they produced; the others are
executed into build/notebooks/ and leave their products in their out_dir: by default the scratch folder
build/lab/generated/ (analysis.paths.SCRATCH_DIR); the paper build passes paper/generated/.
"""
import ast
import json
import logging
import tempfile
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.paths import BUILD_DIR, REPO, portable_text

NOTEBOOKS_DIR = REPO / "notebooks"


def notebook_path(name: str) -> Path:
    path = NOTEBOOKS_DIR / f"{name}.ipynb"
    if not path.is_file():
        valid = sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb"))
        raise HeapcostError(f"unknown notebook {name!r}; valid: {', '.join(valid)}")
    return path


def default_parameters(path: Path) -> dict:
    """The names and default values assigned in the notebook's cell tagged `parameters`."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"])
            values = {}
            for node in ast.parse(source).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        values[node.targets[0].id] = ast.literal_eval(node.value)
                    except ValueError:
                        values[node.targets[0].id] = None
            return values
    raise HeapcostError(f"{path.name} has no cell tagged 'parameters'")


def parse_assignments(items, defaults: dict) -> dict:
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise HeapcostError(f"parameter {item!r} is not NAME=VALUE")
        if name not in defaults:
            raise HeapcostError(f"unknown parameter {name!r}; valid: {', '.join(defaults)}")
        default = defaults[name]
        if isinstance(default, bool):
            if value.lower() not in ("0", "1", "true", "false", "yes", "no", ""):
                raise HeapcostError(f"parameter {name} must be 0 or 1, not {value!r}")
            params[name] = value.lower() in ("1", "true", "yes")
        elif isinstance(default, (int, float)) and not isinstance(default, bool) and value != "":
            try:
                params[name] = type(default)(value)
            except ValueError:
                raise HeapcostError(f"parameter {name} must be a number, not {value!r}") from None
        else:
            params[name] = value
    return params


def ipc_kernel_manager(sockets: Path) -> type:
    """A kernel manager whose kernel talks to it over Unix sockets in `sockets` (a private directory), not over
    TCP on the loopback: nothing else on the machine can connect, and the kernel has no reason to warn. An idle
    kernel is asked to shut down without being interrupted first."""
    from jupyter_client import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=str(sockets / "kernel"), **kwargs)

        async def _async_interrupt_kernel(self):
            # jupyter_client interrupts a kernel before asking it to shut down; after the last cell it is idle,
            # and the interrupt only made it log "KeyboardInterrupt caught in kernel" when it landed mid-loop
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return IPCKernelManager


def execute(path: Path, output: Path, params: dict, *, echo: bool = True) -> None:
    """Run a notebook with papermill into `output`; with echo, every cell's output is logged as it runs.
    The kernel runs in notebooks/, as in JupyterLab."""
    import papermill

    if echo:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        logging.getLogger("papermill").setLevel(logging.INFO)
    try:
        with tempfile.TemporaryDirectory(prefix="heapcost-kernel-") as sockets:
            papermill.execute_notebook(str(path), str(output), parameters=params, cwd=str(NOTEBOOKS_DIR),
                                       kernel_name="python3", log_output=echo, progress_bar=False,
                                       kernel_manager_class=ipc_kernel_manager(Path(sockets)))
    except papermill.PapermillExecutionError as exc:
        # The analysis code inside raised; its own one-line message is the useful part.
        message = (exc.evalue or str(exc)).strip().splitlines()[0]
        raise HeapcostError(f"notebook {path.name} failed ({exc.ename}): {message}; executed copy: {output}") from None


def run_measure_notebook(params: dict) -> Path:
    """Validate the campaign first (bad input: no run directory), then run it through the notebook."""
    from analysis.harness.timing.measure import Campaign

    Campaign(profile=params.get("PROFILE", "quick"), allocators=params.get("ALLOCATORS"),
             workloads=params.get("WORKLOADS"), extra_allocators=params.get("EXTRA_ALLOCATORS"),
             mode=params.get("MODE", "time"), target_ci=params.get("TARGET_CI") or None,
             budget_min=params.get("BUDGET_MIN") or None, blocks=params.get("BLOCKS") or None,
             seed=params.get("SEED") if params.get("SEED") not in (None, "") else None, progress=False,
             protocol=params.get("PROTOCOL", "lockstep"), pin=params.get("PIN", "auto"), force=params.get("FORCE"),
             scales=params.get("SCALES"), extra_workloads=params.get("EXTRA_WORKLOADS"),
             pairs=params.get("PAIRS"))
    with tempfile.TemporaryDirectory(prefix="heapcost-nb-") as tmp:
        record = Path(tmp) / "run_dir.txt"
        output = Path(tmp) / "measure.ipynb"
        try:
            execute(notebook_path("measure"), output,
                    {**params, "PROGRESS": "text", "RECORD_RUN_DIR_TO": str(record)})
        finally:
            # Once the campaign has named its run, the executed notebook belongs to it, failed or not.
            if record.exists() and output.exists():
                run_dir = Path(record.read_text().strip())
                target = run_dir / "measure.ipynb"
                n = 1
                while target.exists():
                    n += 1
                    target = run_dir / f"measure-{n}.ipynb"
                # papermill records the temporary folder and the checkout's place: written portably
                target.write_text(portable_text(output.read_text()))
    return run_dir


def add_arguments(parser):
    parser.add_argument("name", help="notebook name in notebooks/ (without .ipynb)")
    parser.add_argument("params", nargs="*", metavar="NAME=VALUE", help="papermill parameters")


def run(args) -> int:
    path = notebook_path(args.name)
    defaults = default_parameters(path)
    params = parse_assignments(args.params, defaults)
    if args.name == "measure":
        print(run_measure_notebook(params))
        return 0
    out_dir = BUILD_DIR / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    execute(path, out_dir / path.name, params)
    print(out_dir / path.name)
    return 0
