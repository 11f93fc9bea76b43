"""`make bench --only alternation`: brought programs taking turns from outside (harness/timing/alternation.py), A/A.

The baseline against a preloaded copy of its own library (the true ratio is one) on programs a user might bring,
none of them written for heapcost: perl, python, sqlite, gzip, sort and gawk from Debian, each run as
EXTRA_WORKLOADS runs it, in one quick campaign. For each program: whether it took turns from outside (and why
not), its window, the paired interval of the A/A ratio over its windows, and the machine time its pair took
(every window's wall time). The target: every interval within ±1% and containing one, in at most 30 s of
machine time per pair.

One campaign's interval holds only what varies between its windows. The bench runs the campaign several times
(seeds seed, seed + 1, ...) and checks whether the campaigns agree within their intervals: Cochran's Q over a
program's campaigns, its p value, and DerSimonian-Laird's between-campaign spread. A small p means a part that
stays fixed through one campaign and changes between campaigns, which no single campaign's interval covers.
"""
import json
import math
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from analysis.errors import HeapcostError

BASELINE, COPY = "glibc", "glibc-copy"
TARGET_HALFWIDTH, TARGET_SECONDS = 0.01, 30.0
# at the shortest window (alternation.MIN_WINDOW_S), 28 s of machine time a pair: the budget, less a margin. An A/A
# window's ratio moves with its runs (two runs of one program taking turns differ by several percent) and with a
# part its runs share, of about the same size (bench/alternation_runs.py takes them apart): both narrow with the
# number of windows the budget holds.
WINDOWS = 56
CAMPAIGNS = 3
# {input} is a text file of the bench's own (generated, fixed seed); {scale} the campaign's scale. Python is the
# distribution's by its path: a python3 found first on PATH may be a version manager's shim (a shell script
# that starts the interpreter in another process), which the fit reads as other threads and keeps on trials.
PROGRAMS = {
    "perl-words": "perl -ne '$w{$_}++ for split; END { print scalar(keys %w), qq(\\n) }' {input}",
    "python-json": "/usr/bin/python3 -c 'import json,sys; d=[{\"k\": i, \"v\": str(i) * 8} for i in range(60000)]; "
                   "print(len(json.loads(json.dumps(d))))'",
    "sqlite-group": "sqlite3 :memory: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<150000) "
                    "SELECT count(DISTINCT x % 977), sum(length(printf(\"%x\", x))) FROM c;'",
    "gzip-text": "gzip -6 -c {input}",
    "sort-text": "sort {input}",
    "gawk-count": "gawk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) k++; print k }' {input}",
}
PACKAGES = {"perl": "perl", "python3": "python3", "sqlite3": "sqlite3", "gzip": "gzip", "sort": "coreutils",
            "gawk": "gawk"}


def write_input(path: Path, lines: int = 60000) -> Path:
    """A text of words with a fixed seed: what perl counts, gzip packs and sort orders."""
    import random

    rng = random.Random(2026)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4000)]
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(lines))
                    + "\n")
    return path


def extra_workloads(input_path: Path, programs=PROGRAMS) -> str:
    """The EXTRA_WORKLOADS value of the programs (quoted as the campaign's parser splits it)."""
    for word in {cmd.split()[0] for cmd in programs.values()}:
        if shutil.which(word) is None:
            raise HeapcostError(f"the alternation bench runs {word}: install {PACKAGES.get(word, word)}")
    return ", ".join(f"{name}={cmd.replace('{input}', str(input_path))}" for name, cmd in programs.items())


def summarize(pairs: pd.DataFrame, alternation: dict) -> list[dict]:
    """Per program: whether it alternated (and why not), its window, the A/A ratio's paired interval and the
    machine time of its pair."""
    from analysis.contract.schema import OK, measured_trials, oriented_pairs
    from analysis.stats import paired

    rows = []
    measured = measured_trials(pairs) if len(pairs) else pairs
    for name, fit in alternation.items():
        row = {"program": name, "alternates": bool(fit.get("applies")), "why": fit.get("why", ""),
               "window_s": fit.get("window_s"), "pairs": 0, "ratio": None, "ci_low": None, "ci_high": None,
               "halfwidth": None, "machine_s": None, "runs_per_window": None, "log_se": None, "df": None}
        sub = measured[measured["workload"] == name] if len(measured) else measured
        ok = sub[sub["status"] == OK] if len(sub) else sub
        if len(ok) >= 3:
            turned = oriented_pairs(ok.reset_index(drop=True), BASELINE)
            d, _ = paired.paired_difference(paired.log_ratios(turned).to_numpy())
            lo, hi = d.interval()
            row.update(pairs=int(len(ok)), ratio=math.exp(d.estimate), ci_low=math.exp(lo), ci_high=math.exp(hi),
                       halfwidth=math.expm1((hi - lo) / 2), log_se=d.se, df=d.df,
                       machine_s=float(pd.to_numeric(sub["wall_a_s"], errors="coerce").sum()),
                       runs_per_window=float(pd.to_numeric(ok["turns_a"], errors="coerce").median()))
        rows.append(row)
    return rows


def between_campaigns(rows: list[dict]) -> list[dict]:
    """Per program measured in two or more campaigns: do the campaigns' A/A ratios agree within their intervals?
    Cochran's Q and its p value, the between-campaign spread (DerSimonian-Laird, as a percentage of the ratio),
    how many campaign intervals contain one, and the campaigns pooled with the campaign as a random effect."""
    from scipy import stats as sps

    from analysis.stats.estimators import Difference
    from analysis.stats.hosts import between_variance, cochran_q, random_effects_pool

    out = []
    for name in dict.fromkeys(r["program"] for r in rows):
        mine = [r for r in rows if r["program"] == name and r["ratio"] is not None]
        if len(mine) < 2:
            continue
        diffs = [Difference(math.log(r["ratio"]), r["log_se"], r["df"]) for r in mine]
        q = cochran_q(diffs)
        pooled = random_effects_pool(diffs)
        lo, hi = pooled.interval()
        out.append({"program": name, "campaigns": len(mine), "contain_1": sum(r["ci_low"] <= 1 <= r["ci_high"]
                                                                              for r in mine),
                    "q": q, "p": float(sps.chi2.sf(q, len(mine) - 1)),
                    "between_percent": 100 * math.expm1(math.sqrt(between_variance(diffs))),
                    "ratio": math.exp(pooled.estimate), "ci_low": math.exp(lo), "ci_high": math.exp(hi)})
    return out


def alternation_bench(blocks: int = WINDOWS, seed: int = 1, force: str = "1", programs=PROGRAMS,
                      campaigns: int = CAMPAIGNS) -> dict:
    """Quick campaigns of the programs under the baseline and its copy (seeds seed, seed + 1, ...), each in a
    private runs folder."""
    from analysis.harness.timing import measure
    from analysis.harness.bench.aa import running_libc

    rows = []
    for k in range(campaigns):
        with tempfile.TemporaryDirectory(prefix="heapcost-bench-alt-") as tmp:
            tmp = Path(tmp)
            spec = extra_workloads(write_input(tmp / "words.txt"), programs)
            camp = measure.Campaign(profile="quick", allocators=BASELINE, extra_allocators=f"{COPY}={running_libc()}",
                                    extra_workloads=spec, blocks=blocks, seed=seed + k, runs_dir=tmp / "runs",
                                    progress=False, force=force)
            run_dir = camp.run()
            info = json.loads((run_dir / "run.json").read_text())
            pairs_csv = run_dir / "pairs.csv"
            pairs = pd.read_csv(pairs_csv, dtype=str) if pairs_csv.is_file() else pd.DataFrame()
            for col in ("block", "warmup", "active_a_s", "active_b_s", "wall_a_s", "turns_a"):
                if col in pairs:
                    pairs[col] = pd.to_numeric(pairs[col], errors="coerce")
            rows += [{**row, "campaign": k + 1, "seed": seed + k}
                     for row in summarize(pairs, info.get("alternation") or {})]
    return {"blocks": blocks, "campaigns": campaigns, "target_halfwidth": TARGET_HALFWIDTH,
            "target_seconds": TARGET_SECONDS, "programs": rows, "between": between_campaigns(rows)}


def format_alternation(result: dict) -> list[str]:
    campaigns = result.get("campaigns", 1)
    lines = ["", "### Brought programs taking turns from outside: A/A (glibc against a copy of itself)", "",
             f"{result.get('blocks', '?')} windows a program in each of {campaigns} campaign(s); target: within "
             f"±{100 * TARGET_HALFWIDTH:g}% and containing 1, in at most {TARGET_SECONDS:g} s of machine time per "
             "pair.", "",
             "| program | campaign | alternates | window (s) | windows | runs a side a window | ratio [95% CI] | ± | "
             "machine s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result.get("programs", []):
        head = f"| {r['program']} | {r.get('campaign', 1)} |"
        if r["ratio"] is None:
            lines.append(f"{head} {'yes' if r['alternates'] else 'no: ' + r['why']} | | | | | | |")
            continue
        lines.append(f"{head} yes | {r['window_s']:g} | {r['pairs']} | {r['runs_per_window']:g} | "
                     f"{r['ratio']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] | {100 * r['halfwidth']:.2f}% | "
                     f"{r['machine_s']:.0f} |")
    between = result.get("between") or []
    if between:
        lines += ["", "Do the campaigns agree within their intervals? (Cochran's Q over a program's campaigns; a "
                  "small p is a part fixed through one campaign that its interval does not hold.)", "",
                  "| program | campaigns | intervals containing 1 | Q | p | between campaigns | pooled [95% CI] |",
                  "|---|---|---|---|---|---|---|"]
        for b in between:
            lines.append(f"| {b['program']} | {b['campaigns']} | {b['contain_1']} | {b['q']:.2f} | {b['p']:.3f} | "
                         f"±{b['between_percent']:.2f}% | {b['ratio']:.4f} [{b['ci_low']:.4f}, {b['ci_high']:.4f}] |")
    return lines


def other_hosts(previous: dict, host: str) -> list[dict]:
    """The alternation A/A measured on hosts other than `host`, from an earlier results.json: its own part (when
    it ran elsewhere, or where its host was not recorded) and the other hosts it kept, one entry per host
    (the newest first), each with when it was measured."""
    entries = []
    measured = previous.get("measured") if isinstance(previous.get("measured"), dict) else {}
    measured = measured.get("alternation")
    if previous.get("alternation"):
        entries.append({"host": (measured or {}).get("host"), "measured": measured,
                        "alternation": previous["alternation"]})
    entries += [e for e in previous.get("alternation_other_hosts") or [] if isinstance(e, dict)]
    kept, seen = [], {host}
    for e in entries:
        if e.get("host") is None or e["host"] not in seen:
            kept.append(e)
            seen.add(e.get("host"))
    return kept


def format_other_hosts(entries) -> list[str]:
    """Per host and program: how many campaigns met the target's half-width and contained one, and the campaigns
    pooled."""
    if not entries:
        return []
    lines = ["", "### The same A/A on other hosts", "",
             "| host | measured | program | campaigns | within the target | containing 1 | pooled [95% CI] | "
             "median machine s |", "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        result = e.get("alternation") or {}
        target = result.get("target_halfwidth", TARGET_HALFWIDTH)
        when = (e.get("measured") or {}).get("utc_start", "not recorded")
        pooled = {b["program"]: b for b in result.get("between") or []}
        rows = [r for r in result.get("programs", []) if r.get("ratio") is not None]
        for program in dict.fromkeys(r["program"] for r in result.get("programs", [])):
            mine = [r for r in rows if r["program"] == program]
            b = pooled.get(program)
            seconds = sorted(r["machine_s"] for r in mine)
            pooled_text = f"{b['ratio']:.4f} [{b['ci_low']:.4f}, {b['ci_high']:.4f}]" if b else "-"
            median_s = f"{seconds[len(seconds) // 2]:.0f}" if seconds else "-"
            lines.append(f"| {e.get('host') or 'not recorded'} | {when} | {program} | {len(mine)} | "
                         f"{sum(r['halfwidth'] <= target for r in mine)} (±{100 * target:g}%) | "
                         f"{sum(r['ci_low'] <= 1 <= r['ci_high'] for r in mine)} | {pooled_text} | {median_s} |")
    return lines
