"""What the paper tests check of a rendered paper: it states exactly what generated/ holds (no tests here)."""
import csv
import json
import re
from pathlib import Path

from analysis.publish.dataset import archive


def squash(text: str) -> str:
    """PDF text extraction breaks lines and spaces differently from the source: compare without them."""
    return re.sub(r"\s+", "", text)


def pdf_pages(pdf: Path) -> list[str]:
    """Each page's text, extracted by PDFium (pypdfium2, which pdfplumber brings): under a second for the whole
    paper where a pure-Python extractor takes most of a minute. Line ends normalised; PDFium's marks for a
    hyphen at a line break and for a zero-width break opportunity read as "-" and nothing."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        pages = []
        for i in range(len(doc)):
            page = doc[i]
            text = page.get_textpage().get_text_range()
            pages.append(text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "-").replace("\u200b", ""))
        return pages
    finally:
        doc.close()


def pdf_text(pdf: Path) -> str:
    """The PDF's text, pages joined."""
    return "".join(pdf_pages(pdf))


def with_supplement_text(pdf: Path) -> str:
    """The paper's text, then its supplement's (supplement.pdf beside it, made by the same build) where there is one."""
    supplement = Path(pdf).with_name("supplement.pdf")
    return pdf_text(pdf) + (pdf_text(supplement) if supplement.is_file() else "")


def generated_csv(out: Path, name: str) -> list[dict]:
    with open(out / "generated" / name, newline="") as fh:
        return list(csv.DictReader(fh))


def assert_paper_states_generated(out: Path, pdf: Path, html: Path, data: Path) -> None:
    """Each result the paper states is in the PDF's and the HTML's text exactly as generated/ holds it: in the
    paper or in its supplement (supplement.pdf beside it, made by the same build)."""
    text = squash(with_supplement_text(pdf))
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
    if Path(html).with_name("supplement.html").is_file():
        html_text += Path(html).with_name("supplement.html").read_text()
    for r in trade:
        assert r["overhead_display"] in html_text


# ------------------------------------------------------------------------------------------ layout
MARGIN_PT = 2 / 2.54 * 72  # paper.typ: page margin 2cm
TOLERANCE_PT = 2.0


def layout_faults(pdf: Path) -> list[str]:
    """What a reader would see as broken layout: text drawn past the text block's left or right edge (a
    table or line wider than the page allows), text printed over other text, and pages (but the last) whose
    content stops above the middle of the page. Read with PDFium, a text object at a time (a run of glyphs
    the typesetter placed together; PDFium's text extraction would drop a glyph printed exactly over its
    twin), boxes in points from the page's top."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    faults = []
    doc = pdfium.PdfDocument(str(pdf))
    try:
        for number in range(1, len(doc) + 1):
            page = doc[number - 1]
            width, height = page.get_size()
            textpage = page.get_textpage()
            texts = []
            for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_TEXT], max_depth=3):
                left, bottom, right, top = obj.get_bounds()
                obj.textpage = textpage
                name = obj.extract().strip() or f"text at ({left:.0f}, {height - top:.0f}) pt"
                texts.append({"text": name[:40], "x0": left, "x1": right, "top": height - top, "bottom": height - bottom})
            lo, hi = MARGIN_PT - TOLERANCE_PT, width - MARGIN_PT + TOLERANCE_PT
            wide = [t for t in texts if t["x0"] < lo or t["x1"] > hi]
            if wide:  # an object's bounds take in a space's advance at a line's end: its glyphs' ink decides
                ink = _ink_boxes(textpage, height)
                for t in wide:
                    inside = [g for g in ink if t["x0"] - 0.5 <= g["x0"] and g["x1"] <= t["x1"] + 0.5
                              and t["top"] - 0.5 <= g["top"] and g["bottom"] <= t["bottom"] + 0.5]
                    if any(g["x0"] < lo or g["x1"] > hi for g in inside):
                        faults.append(f"page {number}: {t['text']!r} runs outside the text block")
            faults += [f"page {number}: {a!r} printed over {b!r}" for a, b in overprinted(texts)]
            bottoms = [height - obj.get_bounds()[1] for obj in page.get_objects(max_depth=3)]
            body = [b for b in bottoms if b < height - MARGIN_PT]  # the page number sits in the bottom margin
            if number < len(doc) and body:
                filled = (max(body) - MARGIN_PT) / (height - 2 * MARGIN_PT)
                if filled < 0.5:
                    faults.append(f"page {number}: content ends {filled:.0%} of the way down the page")
    finally:
        doc.close()
    return faults


def _ink_boxes(textpage, height: float) -> list[dict]:
    """The box of every glyph on the page that is not a space (x0, x1, top, bottom from the page's top): its
    ink, cut at the next glyph's origin on the same line (an italic f's overhang is kerning into the next
    character, as a typesetter measures it, not text past the margin)."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    raw = textpage.raw
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    x, y = ctypes.c_double(), ctypes.c_double()
    glyphs = []
    for i in range(pdfium_c.FPDFText_CountChars(raw)):
        if pdfium_c.FPDFText_IsGenerated(raw, i) == 1 or not pdfium_c.FPDFText_GetCharBox(raw, i, left, right, bottom, top):
            continue
        pdfium_c.FPDFText_GetCharOrigin(raw, i, x, y)
        glyphs.append({"space": chr(pdfium_c.FPDFText_GetUnicode(raw, i)).isspace(), "x0": left.value,
                       "x1": right.value, "top": height - top.value, "bottom": height - bottom.value,
                       "origin": x.value, "line": y.value})
    for a, b in zip(glyphs, glyphs[1:]):
        if abs(a["line"] - b["line"]) < 0.5 and a["origin"] < b["origin"] < a["x1"]:
            a["x1"] = b["origin"]
    return [g for g in glyphs if not g["space"]]


def overprinted(boxes: list[dict], share: float = 0.3) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes overlap by more than `share` of the smaller one (a sweep by top)."""
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
