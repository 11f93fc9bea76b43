"""Figures as a reader sees them: each SVG of paper/generated/ at the size the paper places it, its texts' boxes
read from the SVG (matplotlib draws text as glyph paths, svg.fonttype = path: a text is a group translated to its
baseline and scaled from glyph units, 100 to the em, its glyphs' advances given), then the sizes, overlaps and
edges a reader would meet."""
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

TEXT_BLOCK_PT = (21 - 2 * 2) / 2.54 * 72  # A4 less common.typ's 2 cm margins
TALLEST_PT = 20 / 2.54 * 72  # common.typ's fig(): a figure taller than 20 cm is drawn 20 cm tall
GRID_GUTTER_PT = 6
SMALLEST_PT = 6.0
UNITS_PER_EM = 100.0
ASCENT, DESCENT, LAST_ADVANCE = 0.76, 0.24, 0.62  # DejaVu Sans, in ems (the last glyph's advance: a wide one)
OVERLAP_SHARE = 0.2  # two texts overlap when they share this much of the smaller one's box
_SVG = "{http://www.w3.org/2000/svg}"
_TRANSFORM = re.compile(r"translate\(([-\d.e]+)[ ,]+([-\d.e]+)\)\s*(?:rotate\(([-\d.e]+)\)\s*)?"
                        r"scale\(([-\d.e]+)[ ,]+([-\d.e]+)\)")


def _call(source: str, start: int) -> str:
    """The text of a call whose "(" is at `start`, to its matching ")" (brackets of content and strings nest)."""
    depth, i, quoted = 0, start, False
    while i < len(source):
        c = source[i]
        if quoted:
            quoted = c != '"' or source[i - 1] == "\\"
        elif c == '"':
            quoted = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return source[start:i + 1]
        i += 1
    return source[start:]


def placements(source: str, generated: Path) -> dict[str, float]:
    """{svg file: the share of the text block's width the document gives it}: every fig("file", ..., width: N%)
    (100% when not given; a name built from a seed is every file it can name), and the images of a grid of
    columns (the cost check's figures, side by side two at a time)."""
    out = {}
    for m in re.finditer(r'#fig\(("(?P<name>[^"]+)"(?P<tail> \+ [^,]+)?)', source):
        call = _call(source, m.start() + len("#fig"))
        width = re.search(r"\bwidth: (\d+)%", call)
        share = int(width.group(1)) / 100 if width else 1.0
        if m.group("tail"):  # "results_debate_" + r.seed + ".svg"
            for f in sorted(generated.glob(m.group("name") + "*.svg")):
                out[f.name] = share
        else:
            out[m.group("name")] = share
            stem = m.group("name").removesuffix(".svg")
            for f in sorted(generated.glob(stem + "-part*.svg")):  # a figure drawn in parts (figures.part_path)
                out[f.name] = share
    for grid in re.finditer(r"#figure\(grid\(columns: calc\.min\((?P<list>\w+)\.len\(\), (?P<cols>\d+)\)", source):
        cols = int(grid.group("cols"))
        for f in sorted(generated.glob("results_cost_check_*.svg")):
            out[f.name] = (1 - (cols - 1) * GRID_GUTTER_PT / TEXT_BLOCK_PT) / cols
    return out


def _size_pt(value: str) -> float:
    return float(value.replace("pt", ""))


def texts(svg: Path) -> tuple[tuple[float, float], list[dict]]:
    """((width, height) in pt, [{"text", "font_pt", "box": (x0, y0, x1, y1)}]) of an SVG as drawn."""
    root = ET.parse(svg, ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))).getroot()
    size = (_size_pt(root.get("width")), _size_pt(root.get("height")))
    out = []
    for g in root.iter(_SVG + "g"):
        if not (g.get("id") or "").startswith("text_"):
            continue
        label = next((c.text.strip() for c in g if c.tag is ET.Comment), "")
        for inner in (c for c in g if c.tag == _SVG + "g" and c.get("transform")):
            m = _TRANSFORM.search(inner.get("transform"))
            advances = [float(u.get("x", 0)) for u in inner if u.tag == _SVG + "use"]
            if not m or not advances:
                continue
            x, y, rotation, s = float(m[1]), float(m[2]), math.radians(float(m[3] or 0)), float(m[4])
            length = (max(advances) + LAST_ADVANCE * UNITS_PER_EM) * s
            up, down = ASCENT * UNITS_PER_EM * s, DESCENT * UNITS_PER_EM * s
            corners = [(dx * math.cos(rotation) - dy * math.sin(rotation), dx * math.sin(rotation) + dy * math.cos(rotation))
                       for dx, dy in ((0, -up), (length, -up), (length, down), (0, down))]
            xs, ys = [x + c[0] for c in corners], [y + c[1] for c in corners]
            out.append({"text": label, "font_pt": s * UNITS_PER_EM, "box": (min(xs), min(ys), max(xs), max(ys))})
    return size, out


def scale_placed(size: tuple[float, float], share: float) -> float:
    """How much the paper scales a figure of `size` placed at `share` of the text block's width."""
    w, h = size
    scale = TEXT_BLOCK_PT * share / w
    return TALLEST_PT / h if h * scale > TALLEST_PT else scale


def faults(svg: Path, share: float) -> list[str]:
    """What a reader of the placed figure meets: a text under 6 pt, a text leaving the figure, two texts over
    each other; one line each, naming the text."""
    size, found = texts(svg)
    scale = scale_placed(size, share)
    out = [f"{svg.name}: '{t['text']}' is {t['font_pt'] * scale:.1f} pt as placed" for t in found
           if t["font_pt"] * scale < SMALLEST_PT - 1e-6]
    w, h = size
    tol = 0.5
    out += [f"{svg.name}: '{t['text']}' leaves the figure" for t in found
            if t["box"][0] < -tol or t["box"][1] < -tol or t["box"][2] > w + tol or t["box"][3] > h + tol]
    for i, a in enumerate(found):
        for b in found[i + 1:]:
            (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = a["box"], b["box"]
            ix, iy = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
            smaller = min((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0))
            if ix > 0 and iy > 0 and smaller > 0 and ix * iy / smaller > OVERLAP_SHARE:
                out.append(f"{svg.name}: '{a['text']}' and '{b['text']}' overlap")
    return out
