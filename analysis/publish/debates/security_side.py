"""What each debate's defence buys, measured: the misuse probes of its primary pair's two configurations side by
side (results_debate_security.csv), so that every answer weighs its cost against what it buys.

For each debate's primary cell (with the defence / without it) the probe rows the paper reports
(publish/security/writer.debate_probe_rows: the reported ones and the page-sized entropy probes beside them)
are compared case by case, a case being one probe at one size:
the defence is better where its outcome is safer (WORST_FIRST: missed, then a late crash, then mitigated, then
caught), worse where it is less safe; a case where either side did not apply (n/a) or did not start is left
out. The entropy probes are given as bits with and without. A configuration measured under another name
(perl on OpenBSD's malloc is OpenBSD's malloc, probed as such) is compared as that name, and said so; one the
probes cannot reach (perl's own malloc, inside the interpreter, where the C probes never call it) or one never
probed leaves the row unmeasured, with the reason.
"""
import pandas as pd

from analysis.harness.allocators.catalog import layout_of

COLUMNS = ["seed", "with", "without", "probed_with", "probed_without", "cases", "better", "worse", "same",
           "better_probes", "worse_probes", "entropy", "entropy_moved", "words", "unmeasured"]
# a debated configuration the probes measure under another name: (that name, why)
# seed 003's pair, probed as its second Linux port (allocators.toml): the same malloc.c 1.128 and reversed diff over
# a compatibility layer of its own, since the first port's could not be rebuilt byte for byte
SECOND_PORTS = {"omalloc-1.128": "omalloc-1.128-port2", "omalloc-1.128-getrbyte": "omalloc-1.128-getrbyte-port2"}
SECOND_PORT = ("probed as the second Linux port of the pair (the same malloc.c 1.128 and reversed diff over a "
               "compatibility layer of its own: the first port's could not be rebuilt byte for byte)")
PROBED_AS = {"perl-omalloc": ("omalloc-1.299", "perl's allocations go to OpenBSD's malloc 1.299, probed as itself"),
             **{first: (second, SECOND_PORT) for first, second in SECOND_PORTS.items()}}
# a configuration no probe reaches, and why
UNREACHABLE = {"perl-mymalloc": "perl's own malloc is out of the C probes' reach: it lives inside the interpreter "
                                "and no probe calls it, every probe of it is n/a, so perl's side of this debate is "
                                "unmeasured"}
SAFETY = {"missed": 0, "late-crash": 1, "mitigated": 2, "caught": 3}
ENTROPY = ("placement-entropy", "placement-entropy-page", "reuse-entropy", "reuse-entropy-page", "address-entropy")


def _probed(name: str) -> tuple[str, str]:
    base = layout_of(name)[0]
    return PROBED_AS.get(base, (base, ""))


def _cases(rows: list[dict], allocator: str) -> dict:
    return {(r["probe"], str(r.get("size") or "")): r for r in rows if r["allocator"] == allocator}


def _bits(row: dict | None) -> str:
    if row is None or row.get("bits") in (None, ""):
        return "-"
    return f"{float(row['bits']):.1f}"


def _apart(a: dict, b: dict) -> bool:
    """Whether two entropy rows' bit intervals do not overlap (a row without an interval is never apart)."""
    try:
        return float(a["bits_ci_low"]) > float(b["bits_ci_high"]) or float(b["bits_ci_low"]) > float(a["bits_ci_high"])
    except (KeyError, TypeError, ValueError):
        return False


def _grouped(cases: list[str], most: int = 3) -> str:
    """'uaf-read at 16 B (missed -> mitigated)', ... as 'uaf-read (4 sizes), ...': the probes, most cases first."""
    counts: dict[str, int] = {}
    for c in cases:
        name = c.split(" ")[0]
        counts[name] = counts.get(name, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    words = [f"{n} ({k} size{'s' if k > 1 else ''})" for n, k in ranked[:most]]
    more = len(ranked) - most
    return ", ".join(words) + (f" and {more} more probe{'s' if more > 1 else ''}" if more > 0 else "")


def compare(rows: list[dict], with_: str, without: str) -> dict:
    """One debate pair's probes side by side (COLUMNS but the seed)."""
    out = dict.fromkeys(COLUMNS, "")
    out.update({"with": with_, "without": without, "cases": 0, "better": 0, "worse": 0, "same": 0})
    (pw, why_w), (po, why_o) = _probed(with_), _probed(without)
    for side, other, other_name, why in ((with_, without, po, why_o), (without, with_, pw, why_w)):
        if layout_of(side)[0] in UNREACHABLE:
            seen = [r["outcome"] for r in _cases(rows, other_name).values()
                    if r["probe"] not in ENTROPY and r["outcome"] in SAFETY]
            alone = (f"{other} alone: of {len(seen)} probe cases, {seen.count('caught')} caught, "
                     f"{seen.count('mitigated')} mitigated, {seen.count('missed')} missed"
                     + (f" ({why})" if why else "") if seen else f"{other} not probed either")
            return {**out, "probed_with": pw if side != with_ else "", "probed_without": po if side != without else "",
                    "words": alone, "unmeasured": UNREACHABLE[layout_of(side)[0]]}
    out.update(probed_with=pw, probed_without=po)
    mine, theirs = _cases(rows, pw), _cases(rows, po)
    if not mine or not theirs:
        missing = " and ".join(n for n, c in ((pw, mine), (po, theirs)) if not c)
        return {**out, "unmeasured": f"{missing} not probed in the reported probe runs (its library was not "
                                     "brought to a probe campaign)"}
    better, worse = [], []
    for key in sorted(set(mine) & set(theirs)):
        if key[0] in ENTROPY:
            continue
        a, b = mine[key]["outcome"], theirs[key]["outcome"]
        if a not in SAFETY or b not in SAFETY:
            continue
        out["cases"] += 1
        label = f"{key[0]}" + (f" at {key[1]} B" if key[1] else "")
        if SAFETY[a] > SAFETY[b]:
            out["better"] += 1
            better.append(f"{label} ({b} -> {a})")
        elif SAFETY[a] < SAFETY[b]:
            out["worse"] += 1
            worse.append(f"{label} ({b} -> {a})")
        else:
            out["same"] += 1
    entropy = [f"{p} {_bits(theirs.get((p, '')))} -> {_bits(mine.get((p, '')))} bits" for p in ENTROPY
               if (p, "") in mine or (p, "") in theirs]
    entropy_moved = [f"{p} {_bits(theirs[(p, '')])} -> {_bits(mine[(p, '')])} bits" for p in ENTROPY
                     if (p, "") in mine and (p, "") in theirs and _apart(mine[(p, "")], theirs[(p, "")])]
    out.update(better_probes="; ".join(better), worse_probes="; ".join(worse), entropy="; ".join(entropy),
               entropy_moved="; ".join(entropy_moved))
    said = []
    if out["better"] or out["worse"]:
        said.append(f"safer in {out['better']} and less safe in {out['worse']} of {out['cases']} probe cases"
                    + (f" (safer: {_grouped(better)})" if better else "")
                    + (f" (less safe: {_grouped(worse)})" if worse else ""))
    else:
        said.append(f"no probe case of {out['cases']} tells the two apart")
    if entropy_moved:
        said.append("entropy, where the intervals are apart: " + ", ".join(entropy_moved))
    note = "; ".join(dict.fromkeys(w for w in (why_w, why_o) if w))
    out["words"] = "; ".join(said) + (f" ({note})" if note else "")
    return out


def debate_security(primary: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """One row per debate's primary cell (`seed`, `configuration` 'with / without' of results_debates.csv)."""
    out = []
    for _, r in primary.iterrows():
        with_, _, without = str(r["configuration"]).partition(" / ")
        out.append({**compare(rows, with_.strip(), without.strip()), "seed": str(r["seed"])})
    return pd.DataFrame(out, columns=COLUMNS)


def page_placement(rows: list[dict], table: pd.DataFrame, seed: str = "003") -> dict | None:
    """OpenBSD's malloc on Linux: the placement entropy of its 64 KiB blocks (placement-entropy-page) under the
    configuration a debate's pair was probed as (seed 003's: OpenBSD's malloc.c 1.128), which tells whether the
    random page addresses it takes from OpenBSD's mmap survive Linux's; None where it was not probed."""
    mine = table[table["seed"].astype(str) == seed] if len(table) else table
    if not len(mine) or str(mine.iloc[0]["unmeasured"]):
        return None
    allocator = str(mine.iloc[0]["probed_with"])
    row = _cases(rows, allocator).get(("placement-entropy-page", ""))
    if row is None or row.get("bits") in (None, ""):
        return None
    return {"allocator": allocator, "bits": _bits(row), "low": f"{float(row['bits_ci_low']):.1f}",
            "high": f"{float(row['bits_ci_high']):.1f}"}
