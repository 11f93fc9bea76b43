"""The literature re-analysis's tables, figure and numbers for the paper."""
import json
from pathlib import Path

from analysis.publish import figures
from analysis.stats.literature import FIGURES, load_figures, reanalyse, slips


def write_outputs(outdir: Path, fig_path: Path = FIGURES) -> dict:
    """literature_reanalysis.csv, literature_slips.csv, literature_003.svg, literature_numbers.json."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    fig = load_figures(fig_path)
    table = reanalyse(fig)
    table.to_csv(outdir / "literature_reanalysis.csv", index=False)
    slips(fig).to_csv(outdir / "literature_slips.csv", index=False)
    figures.literature_003(fig, outdir / "literature_003.svg")
    s3 = table[(table["seed"] == "003") & (table["method"] == "yuen-trim20-log")].set_index("scenario")
    w3 = table[(table["seed"] == "003") & (table["method"] == "welch-raw (naive)")].set_index("scenario")
    numbers = {
        "figures_transcribed": int(len(fig)),
        "slips_flagged": int(len(slips(fig))),
        "seed003": {sc: {"ratio": s3.loc[sc, "ratio"], "ci_low": s3.loc[sc, "ci_low"],
                         "ci_high": s3.loc[sc, "ci_high"], "welch_raw_p": w3.loc[sc, "p_value"],
                         "welch_raw_ci": [w3.loc[sc, "ci_low"], w3.loc[sc, "ci_high"]]}
                    for sc in s3.index},
        "seed001_wall_ratio_corrected": float(8563 / 6546),
        "single_run_comparisons": int((table["method"] == "single run: no interval").sum()),
    }
    (outdir / "literature_numbers.json").write_text(json.dumps(numbers, indent=2, default=float))
    return numbers
