"""What the paper tests check of a rendered paper: it states exactly what generated/ holds (no tests here)."""
import csv
import json
import re
from pathlib import Path

from analysis.publish import dataset


def squash(text: str) -> str:
    """PDF text extraction breaks lines and spaces differently from the source: compare without them."""
    return re.sub(r"\s+", "", text)


def pdf_text(pdf: Path) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() for page in PdfReader(str(pdf)).pages)


def generated_csv(out: Path, name: str) -> list[dict]:
    with open(out / "generated" / name, newline="") as fh:
        return list(csv.DictReader(fh))


def assert_paper_states_generated(out: Path, pdf: Path, html: Path, data: Path) -> None:
    """Each result the paper states is in the PDF's and the HTML's text exactly as generated/ holds it."""
    text = squash(pdf_text(pdf))
    numbers = json.loads((out / "generated" / "results_numbers.json").read_text())
    # the verdict table: every allocator with its overhead, score interval and verdict
    trade = generated_csv(out, "results_tradeoff.csv")
    assert trade, "no verdicts"
    for r in trade:
        assert squash(r["allocator"] + r["run"] + r["workloads"] + r["overhead_display"] + r["score_display"]) in text, \
            r["allocator"]
        assert squash(r["verdict"]) in text
    # the ablations, the geometric means and the abstract's extremes
    for r in generated_csv(out, "results_ablations.csv"):
        if r["workload"] == "all":
            assert squash(r["display"]) in text and squash(r["memory_display"]) in text
    for r in generated_csv(out, "results_speed_geomean.csv") + generated_csv(out, "results_memory_geomean.csv"):
        assert squash(r["allocator"] + r["workloads"] + r["display"] + r["percent"]) in text
    for key in ("cheapest", "dearest"):
        assert squash(numbers["speed"][key]["display"]) in text
    for r in generated_csv(out, "results_per_free_geomean.csv"):
        assert squash(r["allocator"] + r["workloads"] + r["display"]) in text
    # threats to validity: this machine's clock facts and the load during the run
    clock = numbers["clock"]
    for key in ("loadavg_min", "loadavg_max", "probe_cv_percent", "perf_counters", "cpufreq_exposed"):
        assert squash(str(clock[key])) in text, key
    # the seeds: the re-analysis ratios and the figures of allocators measured only there
    for r in generated_csv(out, "results_seed_only.csv"):
        assert squash(r["ratio_display"]) in text
    for r in generated_csv(out, "literature_reanalysis.csv"):
        assert squash(f"{round(float(r['ratio']), 3):g}") in text
    # the five debates: every measured ratio and every verdict as generated
    debates = generated_csv(out, "results_debates.csv")
    assert {r["seed"] for r in debates} == {"000", "001", "002", "003", "004"}
    for r in debates:
        assert squash(r["verdict"]) in text, r["seed"]
        if r["display"] != "n/a":
            assert squash(r["display"]) in text, r["seed"]
    # data availability: the archive's checksum, computed again from the dataset
    assert dataset.checksum(data) in text
    html_text = html.read_text()
    assert dataset.checksum(data) in html_text
    for r in trade:
        assert r["overhead_display"] in html_text
