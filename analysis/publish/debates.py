"""The five debates, answered: for each seed, its claim (from data/literature/figures.csv, never typed), what
heapcost measured for the contested configuration on the workload that re-creates the seed's benchmark, and
a verdict by fixed rules on the 95% confidence interval.

Verdict rules (a claim is either a ratio, "costs about x", or a bound, "not noticeably slower"):
- a claimed ratio is *supported* when it lies inside the interval and the interval excludes 1 (a cost was
  resolved and it is the claimed one), *refuted* when it lies outside the interval, and *unresolved* when the
  interval holds both the claim and 1 (the precision reached, its half-width, is stated);
- "not slower" is *supported* when the interval's upper end is at most 1 + MARGIN, *refuted* when its lower end
  is above 1 + MARGIN, *unresolved* otherwise;
- a configuration this machine cannot run is *not measured here*, with why; a stand-in measured in its place is
  named with its numbers but gets no verdict (a brought allocator of the debated system's name, from any run,
  takes its place in the table and gets the verdict).
Instruction counts per free (callgrind) are exact: they are reported beside the seed's, without a verdict.
"""
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.harness.workloads import PERL_CASES
from analysis.publish.ablations import ratio_within_run
from analysis.publish.results import BASELINE, MARGIN, Results, fmt_interval, fmt_ratio

COLUMNS = ["seed", "topic", "claim", "claim_line", "claimed", "configuration", "workload", "run_id", "ratio",
           "ci_low", "ci_high", "display", "halfwidth_percent", "memory_display", "user_display", "sys_display",
           "per_free_ratio", "added_per_free", "writes_per_free_ratio", "claimed_per_free", "verdict", "not_measured"]


@dataclass(frozen=True)
class Debate:
    seed: str
    topic: str
    workload: str  # the workload that re-creates the seed's benchmark
    contested: tuple  # (configuration with the defence, the same without it): the first one present is answered
    stand_ins: tuple  # measured in its place when no contested pair is in the dataset
    claim_metric: str  # the metric of the claim row in figures.csv; "" for a bound ("not slower")
    per_free_metric: str = ""  # the seed's own per-free figure, when it has one
    not_measured: str = ""  # why the contested configuration itself cannot be measured here
    cases: tuple = ()  # more workloads answered row by row (the seed's benchmark case by case)
    every_pair: bool = False  # a row for each contested pair present (builds and variants of one system)

    @property
    def workloads(self) -> tuple:
        return (self.workload, *self.cases)


HARDENED = ("hardened-72fb357", "hardened-light-72fb357", "hardened-2026062800", "hardened-light-2026062800")
DEBATES = [
    Debate("000", "perl on OpenBSD: the system malloc instead of perl's own", "perl-strcat",
           (("perl-omalloc", "perl-mymalloc"),), (("perl-sysmalloc", "perl-mymalloc"),), "",
           not_measured="OpenBSD's malloc is in no package registry here: bring it as a library "
                        "(EXTRA_ALLOCATORS=perl-omalloc=...); measured in its place: perl on the system malloc "
                        "(glibc) against perl's own malloc, one perl source built both ways",
           cases=tuple(f"perl-{c}" for c in PERL_CASES)),
    Debate("001", "hardened_malloc in Fedora: the kernel build", "compile",
           tuple((h, BASELINE) for h in HARDENED), (("scudo", BASELINE), ("mimalloc-secure", BASELINE)),
           "wall_ratio", every_pair=True, cases=("build",),
           not_measured="hardened_malloc is in no package registry here: bring it as a library "
                        "(EXTRA_ALLOCATORS=hardened-72fb357=...); measured in its place: the first of scudo and "
                        "mimalloc-secure present"),
    Debate("002", "poisoning freed memory in mozjemalloc", "dom-churn",
           (("mozjemalloc-poison", "mozjemalloc"),), (("jemalloc-junk-free", "jemalloc"),), "claim_slowdown",
           "claim_instructions_per_free_increase",
           not_measured="mozjemalloc (Firefox's fork) is not built here (`make allocators` builds it from "
                        "Debian's firefox-esr source): jemalloc's own poison on free (junk:free) is measured in "
                        "its place"),
    Debate("003", "saving random bits in OpenBSD's malloc", "pow2-churn",
           (("omalloc-1.128", "omalloc-1.128-getrbyte"), ("omalloc-1.128-getpid", "omalloc-1.128-getrbyte-getpid")),
           (), "", every_pair=True,
           not_measured="the patch changes OpenBSD's malloc, which is in no package registry here: bring "
                        "revision 1.128 and the same with the seed's diff reversed (EXTRA_ALLOCATORS="
                        "omalloc-1.128=...,omalloc-1.128-getrbyte=...); nothing stands in for it",
           cases=("pow2-ladder",)),
    Debate("004", "glibc's tcache double-free check", "small-loop",
           (("glibc-built", "glibc-no-tcache-key"),), (("glibc", "glibc-notcache"),), "",
           not_measured="the key check cannot be switched off by a tunable; until a build of glibc without it "
                        "is measured (glibc-no-tcache-key), the whole tcache (glibc against glibc-notcache) "
                        "stands in, which is not the question"),
]


def _ratio_row(table: pd.DataFrame, with_: str, without: str, workload: str) -> dict | None:
    """The ratio with/without on a workload from a table of ratios (ablations: allocator over base; or
    comparisons with the baseline), inverted when the table holds without/with."""
    if table is None or table.empty:
        return None
    base_col = "base" if "base" in table else None
    for a, b, invert in ((with_, without, False), (without, with_, True)):
        if base_col:
            hit = table[(table["allocator"] == a) & (table["base"] == b) & (table["workload"] == workload)]
        elif b == BASELINE:
            hit = table[(table["allocator"] == a) & (table["workload"] == workload)]
        else:
            continue
        if len(hit):
            r = hit.iloc[0]
            ratio, lo, hi = float(r["ratio"]), float(r["ci_low"]), float(r["ci_high"])
            if invert:
                ratio, lo, hi = 1 / ratio, 1 / hi, 1 / lo
            return {"ratio": ratio, "ci_low": lo, "ci_high": hi, "run_id": r.get("run_id", "")}
    return None


def _within_run(cells: pd.DataFrame, with_: str, without: str, workload: str) -> list[dict]:
    """with/without from each run's comparisons with its own baseline (ablations.ratio_within_run), with the
    number of measurements behind it (the smaller side's trials or pairs)."""
    import math

    if cells is None or cells.empty:
        return []
    out = []
    for run_id, rows in cells[cells["workload"] == workload].groupby("run_id"):
        d = ratio_within_run(rows, with_, without)
        if d is not None:
            lo, hi = d.interval()
            used = rows[rows["allocator"].isin([with_, without])]["n"]
            out.append({"ratio": math.exp(d.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi),
                        "run_id": run_id, "n": int(used.min()) if len(used) else 0,
                        "direct": base_of(rows) in (with_, without)})
    return out


def _pair_ratio(res: Results, with_: str, without: str, workload: str, memory: bool = False,
                metric: str = "") -> dict | None:
    """The measurement of with/without on a workload with the most trials or pairs behind it (then the one
    from the run that leads for the allocator, then a direct comparison over a ratio of two, then the narrower
    interval): an ablation row of one family
    or any run's comparisons with its own baseline. Never the narrowest interval alone: a run that stopped
    early can have an interval narrower than its data support."""
    abl = None if metric else (res.ablation_memory if memory else res.ablation)
    found = []
    row = _ratio_row(abl, with_, without, workload)
    if row:
        pair = ((abl["allocator"] == with_) & (abl["base"] == without)) | ((abl["allocator"] == without) & (abl["base"] == with_))
        hit = abl[pair & (abl["workload"] == workload)]
        found.append({**row, "n": int(pd.to_numeric(hit["n"], errors="coerce").fillna(0).max()) if len(hit) else 0,
                      "direct": True})
    found += _within_run(res.cells.get(metric or ("maxrss_kb" if memory else "wall_s")), with_, without, workload)
    if not found:
        return None
    geo = res.speed.geomean.set_index("allocator") if res.speed is not None else pd.DataFrame()
    lead = geo["run_id"].get(with_) if "run_id" in geo else None
    return max(found, key=lambda r: (r["n"], r["run_id"] == lead, r["direct"], -(r["ci_high"] / r["ci_low"])))


def base_of(rows: pd.DataFrame) -> str:
    return str(rows["baseline"].iloc[0]) if len(rows) else ""


def _per_free(res: Results, with_: str, without: str, workload: str) -> dict:
    """Exact callgrind quantities per free of with/without at their largest common scale: the ratio of
    instructions, the instructions added (they carry to a program with another allocation rate) and the ratio
    of data writes (what poisoning adds); {} when callgrind counted only one side."""
    if res.per_free is None or res.per_free.empty:
        return {}
    pf = res.per_free[res.per_free["workload"] == workload]
    a, b = (pf[pf["allocator"] == x].set_index("scale") for x in (with_, without))
    common = sorted(set(a.index) & set(b.index))
    if not common:
        return {}
    a, b = a.loc[common[-1]], b.loc[common[-1]]
    writes = (float(a["data_writes"]) / float(a["free_calls"])) / (float(b["data_writes"]) / float(b["free_calls"])) \
        if "data_writes" in a and float(b["data_writes"]) > 0 else None
    return {"ratio": float(a["instructions_per_free"] / b["instructions_per_free"]),
            "added": float(a["instructions_per_free"] - b["instructions_per_free"]), "writes": writes}


def _claim(figures: pd.DataFrame, seed: str, metric: str) -> tuple[str, str, float | None]:
    """(the claim's words, its line, the claimed ratio when it is a number) from the transcribed figures."""
    rows = figures[figures["seed"].astype(str).str.zfill(3) == seed]
    words = rows[rows["kind"] == "claim"]
    text = words.iloc[0]["text"] if len(words) else ""
    line = str(words.iloc[0]["line"]) if len(words) else ""
    if not metric:
        return text, line, None
    hit = rows[rows["metric"] == metric]
    if hit.empty:
        return text, line, None
    r = hit.iloc[0]
    value = float(r["value"])
    ratio = 1 + value / 100 if str(r["unit"]).strip() == "%" else value
    return text or str(r["text"]), str(r["line"]), ratio


def verdict(claimed: float | None, ratio: float, lo: float, hi: float, margin: float = MARGIN) -> str:
    half = f"±{(hi / lo) ** 0.5 * 100 - 100:.1f}%"
    if claimed is None:
        if hi <= 1 + margin:
            return f"supported: not slower by more than {margin * 100:.0f}% (upper end {fmt_ratio(hi)})"
        if lo > 1 + margin:
            return f"refuted: slower by more than {margin * 100:.0f}% (lower end {fmt_ratio(lo)})"
        return f"unresolved at {half}: the interval reaches past {fmt_ratio(1 + margin)}"
    if not lo <= claimed <= hi:
        return f"refuted: the claimed {fmt_ratio(claimed)} lies outside the interval"
    if lo <= 1 <= hi:
        return f"unresolved at {half}: the interval holds both the claim and no cost"
    return f"supported: the claimed {fmt_ratio(claimed)} lies inside the interval"


def _measured(res: Results, with_: str, without: str, workload: str, claimed) -> dict | None:
    """One row's measurements of with/without on a workload (None when no run has both), with its verdict."""
    speed = _pair_ratio(res, with_, without, workload)
    if speed is None:
        return None
    mem = _pair_ratio(res, with_, without, workload, memory=True)
    cpu = {m: _pair_ratio(res, with_, without, workload, metric=m) for m in ("user_s", "sys_s")}
    pf = _per_free(res, with_, without, workload)
    return dict(configuration=f"{with_} / {without}", workload=workload, run_id=speed["run_id"],
                ratio=speed["ratio"], ci_low=speed["ci_low"], ci_high=speed["ci_high"],
                display=fmt_interval(speed["ratio"], speed["ci_low"], speed["ci_high"]),
                halfwidth_percent=f"{(speed['ci_high'] / speed['ci_low']) ** 0.5 * 100 - 100:.1f}",
                memory_display=_shown(mem),
                user_display=_shown(cpu["user_s"]), sys_display=_shown(cpu["sys_s"]),
                per_free_ratio=fmt_ratio(pf["ratio"]) if pf else "n/a",
                added_per_free=f"{pf['added']:+.0f}" if pf else "n/a",
                writes_per_free_ratio=fmt_ratio(pf["writes"]) if pf.get("writes") else "n/a",
                verdict=verdict(claimed, speed["ratio"], speed["ci_low"], speed["ci_high"]))


def _shown(r: dict | None) -> str:
    return fmt_interval(r["ratio"], r["ci_low"], r["ci_high"]) if r else "n/a"


def answer(res: Results, figures: pd.DataFrame) -> pd.DataFrame:
    """A row per debate and workload (the seed's case), and per contested pair present where the debate
    asks for every build of its system; stand-ins only where no contested pair was measured at all."""
    rows = []
    for d in DEBATES:
        text, line, claimed = _claim(figures, d.seed, d.claim_metric)
        _, _, claimed_pf = _claim(figures, d.seed, d.per_free_metric) if d.per_free_metric else ("", "", None)
        head = {"seed": d.seed, "topic": d.topic, "claim": text, "claim_line": line,
                "claimed": fmt_ratio(claimed) if claimed else ("not slower" if d.contested else ""),
                "claimed_per_free": fmt_ratio(claimed_pf) if claimed_pf else "", "not_measured": ""}
        found = []
        for workload in d.workloads:
            for with_, without in d.contested:
                m = _measured(res, with_, without, workload, claimed)
                if m:
                    found.append(m)
                    if not d.every_pair:
                        break
        if not found:
            for workload in d.workloads:
                for with_, without in d.stand_ins:
                    m = _measured(res, with_, without, workload, claimed)
                    if m:
                        # a stand-in answers no debate: its numbers are shown, never a verdict
                        found.append({**m, "not_measured": d.not_measured,
                                      "verdict": f"no verdict: {m['configuration']} stands in for the debated system"})
                        break
        rows += [{**head, **m} for m in found] or [
            {**head, "workload": d.workload, "configuration": "", "display": "n/a", "memory_display": "n/a",
             "user_display": "n/a", "sys_display": "n/a", "per_free_ratio": "n/a", "added_per_free": "n/a",
             "writes_per_free_ratio": "n/a",
             "verdict": "not measured here", "not_measured": d.not_measured}]
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.replace({np.nan: ""})
