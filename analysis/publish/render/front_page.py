"""The paper's first page: the five debates' answers and the trade-off's headline, read from the products the
debates and the trade-off already wrote (results_debates.csv, results_debate_hosts.csv, results_tradeoff.csv).

results_front.csv holds one row per debate's registered primary cell: the pair measured, the workload, where
it was measured (each processor kind with its machines' names), the answer on each host, the verdict across
hosts and whether the answer carries to the setting the debate was about. A host is named as everywhere else
in the paper: its processor kind's one label and its machines' short names (analysis/contract/host.py). The abstract's sentences are built from the same rows, so an answer added later
fills the first page without new prose."""
from pathlib import Path

import pandas as pd

from analysis.publish.render.products import write_csv

FRONT_COLUMNS = ["seed", "debate", "claim", "pair", "workload", "cell", "where", "per_host", "decision", "verdict",
                 "short_verdict", "security", "transfers", "sentence"]

# What a row measured here says about the system the debate was about, by the contested configuration's name
# (its prefix): the debated setting and this package's differ where the machine cannot run the debated one.
TRANSFERS = (
    ("perl-omalloc", "no: OpenBSD's malloc on Linux through a compatibility layer of ours, not perl on OpenBSD; "
                     "large blocks depend on the kernel's mmap"),
    ("hardened-", "in part: the seed's hardened_malloc commit preloaded as the seed did, on a re-created build, "
                  "not the kernel package build"),
    ("mozjemalloc", "in part: Firefox ESR's mozjemalloc as a release build with gcc (clang builds, as Mozilla's, "
                    "and the seed's whole-block poisoning are secondary cells), on a re-created DOM workload, not "
                    "Speedometer"),
    ("omalloc-1.128", "in part: OpenBSD's 1.128 on Linux through a compatibility layer of ours, each side in "
                      "layout builds; the patch also narrows the page-cache scan, measured apart as secondary cells"),
    ("glibc-built", "in part: glibc built here with and without glibc 2.29's tcache double-free key (the tcache "
                    "check glibc adopted; the seed's 2018 patch is not in its thread), on a re-creation of the "
                    "seed's loop"),
)


def transfer_note(configuration: str) -> str:
    with_side = configuration.split(" / ")[0].strip()
    for prefix, note in TRANSFERS:
        if with_side.startswith(prefix):
            return note
    return ""


def kind_machines(rows: pd.DataFrame) -> dict[str, list[str]]:
    """{processor kind's label: the names of its machines behind the answers} for rows of
    results_debate_hosts.csv (`processor`, and `machines` the "; "-joined machine names)."""
    out: dict[str, set] = {}
    for _, r in rows.iterrows():
        out.setdefault(str(r["processor"]), set()).update(m for m in str(r["machines"]).split("; ") if m)
    return {kind: sorted(names) for kind, names in sorted(out.items())}


def _machines(rows: pd.DataFrame) -> str:
    """The machines behind the answers, by kind: 'AMD EPYC 2600 MHz (25/17/1): K-1a2b3c, M-4d5e6f; ...'."""
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kind_machines(rows).items())


def primary_cells(debates: pd.DataFrame) -> pd.DataFrame:
    """Each debate's registered primary cell, by seed (none where the table has no cells)."""
    if debates.empty or "cell" not in debates:
        return debates.iloc[0:0]
    return debates[debates["cell"].astype(str) == "primary"].sort_values("seed")


def cell_hosts(hosts: pd.DataFrame, cell) -> pd.DataFrame:
    """The rows of results_debate_hosts.csv that answer one debate cell (seed, configuration, workload)."""
    if not len(hosts):
        return hosts
    return hosts[(hosts["seed"].astype(str) == str(cell["seed"])) & (hosts["configuration"] == cell["configuration"])
                 & (hosts["workload"] == cell["workload"])]


def front_machines(debates: pd.DataFrame, hosts: pd.DataFrame) -> str:
    """Every kind behind the first page's answers with its machines, each kind once."""
    mine = [cell_hosts(hosts, r) for _, r in primary_cells(debates).iterrows()]
    mine = [m for m in mine if len(m)]
    return _machines(pd.concat(mine)) if mine else ""


def _f(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if v != v else v


def decision_display(h) -> str:
    """A host's answer as the decision reads it: the ratio with the 90% interval of the kind's mean (a one-sided
    test at 5% on each side), and the 95% interval for the next machine of the kind beside it."""
    ratio, lo, hi = _f(h.get("ratio")), _f(h.get("mean90_low")), _f(h.get("mean90_high"))
    if ratio is None:
        return ""
    shown = f"{ratio:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else f"{ratio:.3f}"
    nlo, nhi = _f(h.get("next_low")), _f(h.get("next_high"))
    if nlo is not None and nhi is not None:
        shown += f"; next machine [{nlo:.3f}, {nhi:.3f}]"
    return shown


def short_verdict(mine: pd.DataFrame) -> str:
    """The decisions on the kinds measured, counted: 'larger than 10% on all 4 kinds' or 'larger than 1% on 1
    of 5 kinds, not decided on 4'."""
    if not len(mine):
        return "not measured"
    counts: dict[str, int] = {}
    for w in mine["decision_words"].astype(str):
        counts[w] = counts.get(w, 0) + 1
    n = len(mine)
    ranked = sorted(counts.items(), key=lambda kv: (kv[0].startswith("not decided"), -kv[1], kv[0]))
    first, rest = ranked[0], ranked[1:]
    words = (f"{first[0]} on all {n} kinds" if first[1] == n > 1 else
             f"{first[0]} on {first[1]} of {n} kind{'s' if n > 1 else ''}")
    for w, k in rest:
        words += f", {'not decided' if w.startswith('not decided') else w} on {k}"
    return words


def ratio_range(mine: pd.DataFrame) -> str:
    """The lowest and highest ratio over the kinds: '1.46-1.55', or one ratio."""
    ratios = [v for v in (_f(x) for x in mine.get("ratio", [])) if v is not None]
    if not ratios:
        return ""
    lo, hi = min(ratios), max(ratios)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def security_words(security: pd.DataFrame, seed: str) -> tuple[str, str]:
    """(the table's words on what the defence buys, the abstract's shorter ones) for a debate, from
    results_debate_security.csv."""
    if security is None or not len(security):
        return "not measured", "security not measured"
    row = security[security["seed"].astype(str) == str(seed)]
    if not len(row):
        return "not measured", "security not measured"
    r = row.iloc[0]
    if str(r.get("unmeasured", "")):
        table = (f"{r['words']}; " if str(r.get("words", "")) else "") + f"unmeasured: {r['unmeasured']}"
        return table, "security not measured (" + str(r["unmeasured"]).split(":")[0].split(" in the ")[0] + ")"
    better, cases = int(float(r["better"])), int(float(r["cases"]))
    worse = int(float(r["worse"]))
    moved = plain_entropy(str(r.get("entropy_moved", "") or ""))
    if moved and better <= 1 and worse <= 1:
        # the misuse cases barely tell the sides apart: what the defence changes is its randomness
        return str(r["words"]), f"{better} safer, {worse} less safe of {cases} misuse cases; {moved}"
    short = (f"safer in {better}" + (f" and less safe in {worse}" if worse else "") + f" of {cases} misuse cases"
             if better or worse else f"no misuse case of {cases} tells them apart")
    return str(r["words"]), short


# the entropy probes in plain words, for the abstract
ENTROPY_WORDS = {"placement-entropy": "placement randomness", "placement-entropy-page": "64 KiB placement randomness",
                 "reuse-entropy": "reuse randomness", "reuse-entropy-page": "page reuse randomness",
                 "address-entropy": "address randomness"}


def plain_entropy(moved: str) -> str:
    """'reuse-entropy-page 7.0 -> 4.9 bits; ...' (security_side's entropy_moved) in plain words: 'page reuse
    randomness 7.0 -> 4.9 bits, ...'."""
    said = []
    for part in (p.strip() for p in moved.split(";") if p.strip()):
        probe, _, rest = part.partition(" ")
        said.append(f"{ENTROPY_WORDS.get(probe, probe)} {rest}")
    return ", ".join(said)


def front_rows(debates: pd.DataFrame, hosts: pd.DataFrame, security: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per debate's primary cell (a debate without one is left out). Hosts are named by their processor
    kind's label as given (analysis.contract.host.processor_label), machines by their names. Each row also
    holds the seed's claim, the answer per kind as the decision reads it, what the defence buys (`security`,
    results_debate_security.csv) and one plain sentence for the abstract."""
    out = []
    for _, r in primary_cells(debates).iterrows():
        mine = cell_hosts(hosts, r).sort_values("processor") if len(hosts) else hosts
        per_host = [f"{h['processor']}: {h['display']} ({h['decision_words']})" for _, h in mine.iterrows()]
        decided = [f"{h['processor']}: {decision_display(h)} ({h['decision_words']})" for _, h in mine.iterrows()]
        verdict = str(r["verdict"])
        with_side, _, without = str(r["configuration"]).partition(" / ")
        topic = str(r["topic"]).split(":")[0]
        claim = str(r.get("claim", "") or "")
        buys, buys_short = security_words(security, r["seed"])
        if per_host:
            verdict_short = short_verdict(mine)
            if verdict_short.startswith("not decided"):
                verdict_short = verdict_short.replace("not decided at this precision", "not decided") + \
                    f" against a {r['margin']} margin"
            sentence = (f"{topic} (claimed: {claim or 'no figure'}): {with_side} took {ratio_range(mine)}x the time "
                        f"of {without} on {r['workload']} ({verdict_short}); {buys_short}.")
        else:
            sentence = (f"{topic}: not measured here "
                        f"({r.get('not_measured', '') or 'no run measured both sides'}).")
        out.append({"seed": str(r["seed"]), "debate": topic, "claim": claim, "pair": str(r["configuration"]),
                    "workload": str(r["workload"]), "cell": f"{r['configuration']} on {r['workload']}",
                    "where": _machines(mine) if len(mine) else "",
                    "per_host": "; ".join(per_host) or "not measured",
                    "decision": "; ".join(decided) or "not measured", "verdict": verdict,
                    "short_verdict": short_verdict(mine), "security": buys,
                    "transfers": transfer_note(str(r["configuration"])), "sentence": sentence})
    return pd.DataFrame(out, columns=FRONT_COLUMNS)


def tradeoff_headline(trade: pd.DataFrame, baseline: str, reduced=()) -> str:
    """One sentence: how many configurations, which lie on the Pareto front, which are safer at no cost, and
    what the front's safest members cost (a ratio from a run at reduced scale named as such)."""
    def at_scale(allocator: str) -> str:
        return ", at reduced scale" if allocator in set(reduced) else ""

    if trade.empty:
        return ""
    front = trade[trade["pareto"].astype(str) == "True"]
    better = trade[trade["verdict"].astype(str).str.startswith("a better default")]
    buys = front[front["verdict"].astype(str).str.startswith("buys security")]
    text = (f"Of {len(trade)} configurations weighed by security score against time, {len(front)} lie on the "
            f"Pareto front; ")
    if len(better):
        text += f"{', '.join(better['allocator'])} {'is' if len(better) == 1 else 'are'} safer than {baseline} " \
                "at no measured cost"
    else:
        text += f"none is safer than {baseline} without costing time"
    if len(buys):
        dearest = buys.loc[buys["score"].astype(float).idxmax()]
        cheapest = buys.loc[buys["overhead"].astype(float).idxmin()]
        text += (f", and along the front security is bought with time: from {cheapest['allocator']} "
                 f"(time ratio {cheapest['overhead_display']}{at_scale(cheapest['allocator'])}, score "
                 f"{cheapest['score_display']}) to {dearest['allocator']} ({dearest['overhead_display']}"
                 f"{at_scale(dearest['allocator'])}, score {dearest['score_display']})")
    return text + "."


def write_front(p, baseline: str, reduced=()) -> dict:
    """results_front.csv from the debates' and the trade-off's products (read through `p`, name -> path);
    returns the numbers for results_numbers.json."""
    def table(name: str) -> pd.DataFrame:
        path = Path(p(name))
        return (pd.read_csv(path, dtype=str, keep_default_na=False) if path.is_file() and path.stat().st_size
                else pd.DataFrame())

    debates, hosts = table("debates.csv"), table("debate_hosts.csv")
    rows = front_rows(debates, hosts, table("debate_security.csv"))
    write_csv(rows, p("front.csv"))
    kinds = sorted(set(hosts["processor"])) if len(hosts) else []
    machines = sorted({m for v in (hosts["machines"] if len(hosts) else []) for m in str(v).split("; ") if m})
    return {"front": {"answers": int(len(rows)), "sentences": list(rows["sentence"]),
                      "machines": front_machines(debates, hosts), "n_kinds": len(kinds),
                      "n_machines": len(machines),
                      "tradeoff": tradeoff_headline(table("tradeoff.csv"), baseline, reduced)}}
