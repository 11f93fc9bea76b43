"""What the paper tests check of a rendered paper: it states exactly what generated/ holds (no tests here)."""
import csv
import json
import os
import re
from pathlib import Path

from analysis.publish.dataset import archive


def squash(text: str) -> str:
    """PDF text extraction breaks lines and spaces differently from the source: compare without them."""
    return re.sub(r"\s+", "", text)


def pdf_text(pdf: Path) -> str:
    """The PDF's text (pypdf), extracted once per PDF's bytes: several tests read the same rendered paper, each
    in its own worker, and extraction takes most of a minute on a slow host."""
    import hashlib

    from pypdf import PdfReader

    from analysis.paths import BUILD_DIR

    data = Path(pdf).read_bytes()
    stored = BUILD_DIR / "memo" / "pdf_text" / f"{hashlib.sha256(data).hexdigest()}.txt"
    if stored.is_file():
        return stored.read_text()
    text = "".join(page.extract_text() for page in PdfReader(str(pdf)).pages)
    stored.parent.mkdir(parents=True, exist_ok=True)
    temporary = stored.with_name(f"{stored.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, stored)
    return text


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
    # the five debates: every host's answer and every verdict across hosts as generated
    debates = generated_csv(out, "results_debates.csv")
    assert {r["seed"] for r in debates} == {"000", "001", "002", "003", "004"}
    for r in debates:
        assert squash(r["verdict"]) in text, r["seed"]
        if r.get("hosts_display", "n/a") not in ("n/a", ""):
            assert squash(r["hosts_display"]) in text, r["seed"]
    # data availability: the archive's checksum, computed again from the dataset
    assert archive.checksum(data) in text
    html_text = html.read_text()
    assert archive.checksum(data) in html_text
    for r in trade:
        assert r["overhead_display"] in html_text


# ------------------------------------------------------------------------------------------ layout
MARGIN_PT = 2 / 2.54 * 72  # paper.typ: page margin 2cm
TOLERANCE_PT = 2.0


def layout_faults(pdf: Path) -> list[str]:
    """What a reader would see as broken layout: text drawn past the text block's left or right edge (a
    table or line wider than the page allows), words printed over other words, and pages (but the last)
    whose content stops above the middle of the page."""
    import pdfplumber

    faults = []
    with pdfplumber.open(str(pdf)) as doc:
        for number, page in enumerate(doc.pages, start=1):
            words = page.extract_words(use_text_flow=False, keep_blank_chars=False)
            for w in words:
                if w["x0"] < MARGIN_PT - TOLERANCE_PT or w["x1"] > page.width - MARGIN_PT + TOLERANCE_PT:
                    faults.append(f"page {number}: {w['text']!r} runs outside the text block")
            # characters, not words: text extraction merges overprinted letters into one "word"
            # (letters and digits only: kerning tucks punctuation under a quote or a W, by design)
            chars = [c for c in page.chars if c["text"].isalnum()]
            faults += [f"page {number}: {a!r} printed over {b!r}" for a, b in overprinted(chars)]
            body = [o for o in page.chars + page.lines + page.rects + page.curves + page.images
                    if o["bottom"] < page.height - MARGIN_PT]  # the page number sits in the bottom margin
            if number < len(doc.pages) and body:
                filled = (max(o["bottom"] for o in body) - MARGIN_PT) / (page.height - 2 * MARGIN_PT)
                if filled < 0.5:
                    faults.append(f"page {number}: content ends {filled:.0%} of the way down the page")
    return faults


def overprinted(boxes: list[dict], share: float = 0.3) -> list[tuple[str, str]]:
    """Pairs of glyphs (or words) whose boxes overlap by more than `share` of the smaller one (a sweep by top)."""
    found = []
    boxes = sorted(boxes, key=lambda w: w["top"])
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if b["top"] >= a["bottom"]:
                break
            dx = min(a["x1"], b["x1"]) - max(a["x0"], b["x0"])
            dy = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
            if dx > 0 and dy > 0:
                smaller = min((a["x1"] - a["x0"]) * (a["bottom"] - a["top"]), (b["x1"] - b["x0"]) * (b["bottom"] - b["top"]))
                if smaller > 0 and dx * dy > share * smaller:
                    found.append((a["text"], b["text"]))
    return found
