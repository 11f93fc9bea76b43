"""What an allocator will cost a program, predicted from its allocation profile and measured per-call costs.

The per-call costs (publish/results/per_call.py) are the time one malloc+free pair adds under an allocator
over the baseline, per size class and reuse pattern, measured by the calls-<class>-<pattern> workloads in
lockstep with the baseline. The program's profile (harness/workloads/profile.py) counts its allocation calls per size
class and the share of its frees whose memory was taken again soon (reuse_share). The model:

    added = sum over classes c of  n_c * (s_c * lifo(m(c)) + (1 - s_c) * random(m(c)))
    predicted ratio = 1 + added / T

- n_c: the program's allocation calls in class c (every entry point that returns a block: malloc, calloc,
  realloc, reallocarray and the aligned ones); each is counted as one pair (its free is in the pair);
- s_c: the class's reuse share (0 where the profile has none): a reused block is the LIFO pattern's case, one
  that is not, the random pattern's;
- m(c): the measured class nearest to c on a log scale; a class above the largest measured small class is a
  large block: the pages cell's cost times c / its class (a block's fresh pages, in proportion to its size);
- T: the program's CPU time under the baseline (user + system, the medians of the profile's timed runs with
  nothing preloaded); its wall time where the profile records no CPU time. CPU time, because a pair's added
  time is time on the CPU and a brought program taking turns is measured by its CPU time per run.

The interval propagates the per-call intervals (each cell's standard error from its interval, cells
independent) through the sum, and T's standard error (the spread of the profile's timed runs, cpu_sd_log over
the square root of timed_runs, or the spread between the blocks the timed runs came in, base_se_log) through
added / T. What the model leaves out (page-level costs of small classes,
threads, cache effects of the program's other work) is not in it.
A large block is charged the pages cell's difference, measured in a loop where glibc takes the same pages again
(its mmap threshold rises after the first free), every page of it written. A program that touches little of its
block (GNU sort reserves a buffer of 256 MiB, xz a dictionary of 64 MiB) pays for few pages under any allocator:
a large block is charged only the share of its pages the program can have touched, at most its peak resident set
(maxrss_kb) over the block's size. This bound was added after the first cost check, whose largest misses were
those two programs (measured: sort's run under hardened_malloc took about 600 more minor faults than under glibc,
not the 65,536 pages of its block); on those programs it is in-sample. A program that allocates a large block
once still pays glibc's page faults too, which the cell's loop does not: for such programs the model overstates
the difference. How often such intervals hold is what predicting programs nobody tuned for, then measuring them,
checks.

A growing realloc that the baseline did in place is not a fresh block (`fresh_calls`): the profile counts each
realloc in the class of its new size, and the model would charge it a whole block of that size, every page of a
large one. A block of GROWN_CLASS (16 KiB) or more is a run of pages that each allocator measured here extends or
remaps where it lies, paying only for the pages added; a smaller one sits in a size class that a slab allocator
cannot grow past, so its growth is a fresh pair there and stays charged. The profile records only program-wide
counts, so the share of a class's reallocs taken as grown in place is the program's: realloc_grow less
realloc_moved (every move counted against the grows, the most they can take), over realloc_calls. This term was
chosen after the third cost check, whose largest misses included bash growing one string 60,003 times (177 moves)
and xgettext growing its buffers 53,628 times: the model charged those grows as fresh 16-64 KiB blocks. On the
third set it is in-sample; the fourth registration checks it.

A class of 16 KiB (or of the smallest held cell measured on the kind, 8 KiB where it is) to 128 KiB of which the
program holds at most HELD_LIVE blocks at once (the profile's peak_live_blocks) takes the held cell nearest it:
LIFO pairs with that many blocks live. The other cells hold 256 blocks live and free them all in turn, and the
pages cell takes a fresh block each time; an allocator that gives an emptied slab's pages back, or maps a block of
that size afresh, pays for pages there that a program holding few such blocks never empties (measured as trials, results_held_blocks.csv: under hardened_malloc-light a 32 KiB pair adds
3.6 us and 0.93 minor faults with 256 live, 0.25 us and none with 4). Chosen after the fourth cost check, whose
zsh, msgcat and msgmerge the cells overcharged; profiles taken before peak_live_blocks existed keep the cells.

The cells draw each block's size from its class, so an allocator that sorts blocks by size pays there for handing a
block of one size to a request of another; a program asking again and again for one size never does. Measured,
before the cells of one size existed: glibc's held cell of 8 KiB took about 50 ns a pair with sizes drawn and 15 ns
with every block of 8192 bytes (glibc above its tcache takes a freed block of the size asked for at once, and sorts
any other into its bins first), jemalloc 15 and 10; the one true awk asks for 8192 bytes 451,513 times, one live at a
time, and every configuration measured about 40 ns a pair dearer against glibc than the drawn cell said (its largest
misses of the seventh set). So a class's reused pairs in the share the profile finds taken by the size just freed
(frees_reused_same_size over frees_reused) take the LIFO or held cell of one size (SAME_SIZE), where the kind has
measured it; the rest keep the drawn cells. Chosen after the seventh cost check: on its programs it is in-sample.

A realloc that grew a large block in place under the baseline is no fresh block (above), but it is not free under
an allocator that moves such a block: the copy and the fresh pages of every step are its. Found on the eighth set's
largest misses (boxes drawing a box around 60,000 lines grows its buffer 599 times past 16 KiB, up to 8 MiB; scudo
took 337,618 minor faults and 0.4 s of system time on it where glibc took 19,201 and 0.03 s, and measured 3.3
times glibc where the model said 1.3; ELinks and rapper likewise): the grow cell (calls-<class>-grow: one block
grown by realloc in steps of 64 KiB to its class, each step's pages written) is charged for those that needed
more pages (grown_pairs), each in proportion to its size, where the kind has measured it; a grow within the block's
pages stays free, as an allocator rounding large blocks to pages grows it there. Chosen on the eighth set's misses:
in sample there. It overcharged hardened_malloc on programs that grow a buffer a page at a time (lowdown: 1.64
predicted, 1.02 measured): that allocator moves a large block only across its size classes, four to a doubling, so
its cost follows the bytes grown, not the grows (10 us a step a page at a time, 140 us 64 KiB at a time), where
scudo's follows the grows (about 750 us a step either way). A second cell grows the same block a page at a time
(calls-<class>-grow-page), and the profile counts the pages its in-place grows added, so grown_pairs splits the
grows between the two cells by how far each grows a step.

A grow within a large block's pages, left free above, is not free under an allocator that places a large block
against the end of its mapping, so that its usable size is the size asked for: measured by hand on lowdown under
scudo (45.7 times glibc's time in 100 ms turns; the model said 4.28), scudo moved all 15,439 grows to 256 KiB or
more, 14,569 of them within the block's pages, and took 4.68 million minor faults to glibc's 12 thousand. Three
more cells grow a 128 KiB, a 1 MiB and a 4 MiB block 256 bytes at a time (calls-<class>-grow-small), and
grown_within_pages charges the grows the baseline did within a large block's pages what a step adds beyond the
128 KiB cell's at the grow's block, linear between the cells, which leaves out what all pay alike (the call, the
page crossed every sixteenth step): scudo keeps a block of 128 KiB or less in a size class with room and moves
none there. It is charged only where the 4 MiB cell's step is dearer than the 1 MiB cell's beyond their standard
errors (one-sided at 5%): a part fitted to noise, or to what differs between the small blocks each cell starts
from, times the blocks of a program that grows a 2 MiB buffer 60,000 times, would be a large error. Chosen on
lowdown's and discount's misses under scudo: in sample there.

A process's start-up and exit (the calls-processes workload: short processes started one at a time, a step each)
is charged only when asked (`startup=True`): added += processes * the cost of one, the profile's processes (those
that made an allocation call) times the measured step. The model registered before the cost check's programs were
measured has no such term, so the check's predictions never take it; the debates' predictions show it beside
theirs (publish/debates/per_call_prediction.py), where the builds start thousands of processes.
"""
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.errors import HeapcostError

ALLOCATING_CALLS = ("malloc_calls", "calloc_calls", "realloc_calls", "reallocarray_calls", "posix_memalign_calls",
                    "aligned_alloc_calls", "memalign_calls", "valloc_calls", "pvalloc_calls")
REUSED, NOT_REUSED, PAGES, PROCESSES, HELD = "lifo", "random", "pages", "processes", "held"
GROW, GROW_PAGE, GROW_SMALL = "grow", "grow-page", "grow-small"
# the grow cells' steps (harness/workloads/builtin.CALL_GROW's bytes a step adds; a test keeps them equal): a cell's
# blocks grow from one step to the cell's class, so the mean block it reallocs is (step + class) / 2
GROW_STEPS = {GROW: 65536, GROW_PAGE: 4096}
# the grow cell in steps under a page (builtin.CALL_GROW_SMALL's bytes a step adds): grown_within_pages
GROW_SMALL_STEP = 256
# the LIFO and held cells with every block of one size (harness/workloads/builtin.SAME_SIZE_WORKLOADS): a class's
# reused pairs taken by the size just freed (frees_reused_same_size) are charged to them where they are measured
SAME_SIZE = {REUSED: "lifo-same", HELD: "held-same"}
# the blocks live in the held cells (harness/workloads/builtin.HELD_SLOTS; a test keeps the two equal): a class a
# program holds at most this many blocks of at once takes the held cell nearest it, from GROWN_CLASS up to the
# largest held class
HELD_LIVE = 4
# the patterns whose step is one malloc+free pair of a small class (pages: a whole fresh block; processes: a
# process started and ended)
SMALL_PATTERNS = ("lifo", "fifo", "random")
Z = 1.959963984540054
Z_ONE_SIDED = 1.6448536269514722  # a one-sided test at 5%: a larger block's step dearer than a smaller's
COST_COLUMNS = ["pattern", "size_class", "added_ns", "added_ns_low", "added_ns_high"]


@dataclass
class Prediction:
    ratio: float
    low: float
    high: float
    added_s: float
    base_s: float
    calls: int
    parts: pd.DataFrame = field(repr=False)  # per measured cell: its calls' weight and what it adds
    added_sd_s: float = 0.0  # the standard error of added_s, from the per-call intervals
    held_kib: float = 0.0  # KiB of small blocks live at the program's peak (held_small_kib), what stats/cost_terms.py's held term multiplies
    # the program's time under heapcost's placement allocator, as shares of its time under the baseline
    # (placement_shares): blocks side by side less the baseline, and scattered less side by side; NaN when the
    # profile has no placement runs. What stats/cost_terms.py's placement terms multiply
    order_share: float = math.nan
    shuffle_share: float = math.nan
    # their standard errors, from the spread of the placement runs against the runs beside them
    # (placement_share_errors); 0 where the profile gives none
    order_share_se: float = 0.0
    shuffle_share_se: float = 0.0


def class_calls(profile: pd.DataFrame) -> pd.DataFrame:
    """Per size class: the allocating calls, the reuse share (0 where the profile gives none) and the same-size
    share: of the class's reused frees, those taken by an allocation of the size just freed (frees_reused_same_size
    over frees_reused; 0 where the profile gives none, as every profile made before it recorded them)."""
    rows = profile[profile["size_class"].notna() & (profile["size_class"].astype(str) != "")]
    rows = rows.assign(size_class=pd.to_numeric(rows["size_class"]).astype(int),
                       value=pd.to_numeric(rows["value"]))
    calls = rows[rows["quantity"].isin(ALLOCATING_CALLS)].groupby("size_class")["value"].sum()
    share = rows[rows["quantity"] == "reuse_share"].set_index("size_class")["value"]
    reused = rows[rows["quantity"] == "frees_reused"].groupby("size_class")["value"].sum()
    same = rows[rows["quantity"] == "frees_reused_same_size"].groupby("size_class")["value"].sum()
    out = pd.DataFrame({"calls": calls})
    out["reuse_share"] = share.reindex(out.index).fillna(0.0).clip(0.0, 1.0)
    reused = reused.reindex(out.index).fillna(0.0)
    same = same.reindex(out.index).fillna(0.0)
    out["same_share"] = (same / reused.where(reused > 0)).fillna(0.0).clip(0.0, 1.0)
    return out[out["calls"] > 0]


GROWN_CLASS = 16384  # a block of this size or more: its pages, not its call, carry what an allocator adds to it


def in_place_share(profile: pd.DataFrame) -> float:
    """The share of the program's realloc calls that grew a block where it lay under the baseline: realloc_grow
    less realloc_moved (every move counted against the grows), over realloc_calls; 0 without reallocs."""
    calls = profile_value(profile, "realloc_calls") or 0.0
    if calls <= 0:
        return 0.0
    grown = (profile_value(profile, "realloc_grow") or 0.0) - (profile_value(profile, "realloc_moved") or 0.0)
    return min(1.0, max(0.0, grown / calls))


def grown_in_place(profile: pd.DataFrame) -> pd.Series | None:
    """{size class: growing reallocs to it that kept their block under the baseline} (realloc_grown less
    realloc_grown_moved, per class of the new size), or None for a profile made before it recorded them."""
    table = _per_class(profile, ("realloc_grown", "realloc_grown_moved"))
    if "realloc_grown" not in table:
        return None if profile_value(profile, "realloc_grow") else pd.Series(dtype=float)
    return (table["realloc_grown"] - table.get("realloc_grown_moved", 0.0)).clip(lower=0.0)


def fresh_calls(profile: pd.DataFrame, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """class_calls less the reallocs of classes of GROWN_CLASS or more that grew a block in place: counted per
    class where the profile records them (grown_in_place), else in_place_share of each such class's realloc
    calls: the calls that ask an allocator for a fresh block. `calls`: class_calls of the profile, when known."""
    calls = class_calls(profile) if calls is None else calls
    per_class = grown_in_place(profile)
    if per_class is not None:
        if per_class.empty or calls.empty:
            return calls
        grown = per_class.reindex(calls.index).fillna(0.0)
        grown[calls.index < GROWN_CLASS] = 0.0
        out = calls.assign(calls=(calls["calls"] - grown).clip(lower=0.0))
        return out[out["calls"] > 0]
    share = in_place_share(profile)
    if share <= 0 or calls.empty:
        return calls
    rows = profile[profile["size_class"].notna() & (profile["size_class"].astype(str) != "")
                   & profile["quantity"].isin(("realloc_calls", "reallocarray_calls"))]
    reallocs = pd.to_numeric(rows["value"]).groupby(pd.to_numeric(rows["size_class"]).astype(int)).sum()
    grown = reallocs.reindex(calls.index).fillna(0.0) * share
    grown[calls.index < GROWN_CLASS] = 0.0
    out = calls.assign(calls=(calls["calls"] - grown).clip(lower=0.0))
    return out[out["calls"] > 0]


def grown_pairs(profile: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """The grow cells' steps that the program's reallocs stand for which grew a large block (GROWN_CLASS or more)
    past its pages in place under the baseline, per class of the new size: realloc_grown_in_place, or
    realloc_grown_pages less realloc_grown_moved in a profile made before it counted them. A grow within the
    block's pages is left alone, since an allocator that rounds a large block to pages grows it there (discount
    grows its 2 MiB buffer 32,171 times by a few bytes, and hardened_malloc-light took 1.3 times glibc's time on it,
    not the 88 that charging every grow a step said).

    What a grow costs an allocator is a part that comes with each move, in proportion to the block moved (scudo
    moves a large block whenever it outgrows its pages), and a part in proportion to the bytes grown (an allocator
    that rounds large blocks to its size classes moves one only across a class: hardened_malloc 72fb357 took about
    10 us a step growing a block a page at a time to 4 MiB and 140 us growing it 64 KiB at a time; scudo about 750
    us either way). The two cells (GROW_STEPS: the same 4 MiB block grown a page and 64 KiB at a time) measure both
    parts, so the program's grows are split between them: x_page + x_64k steps such that their mean blocks sum to
    the program's (each grow 0.75 c of class c), and their steps to the pages its grows added
    (realloc_grown_in_place_pages). A program whose steps are larger for its blocks than the 64 KiB cell's takes
    that cell alone, one whose steps are smaller than the page cell's takes the page cell alone, the blocks summed
    either way; a kind without the page cell, or a profile without the pages, takes the 64 KiB cell alone. No rows
    where the costs have no grow cell (a kind that has not measured it), the profile does not count the grows past a
    page (every profile made before it did), or none grew in place."""
    empty = pd.DataFrame(columns=["pattern", "size_class", "pairs"])
    cells = dict(zip(costs["pattern"], costs["size_class"])) if len(costs) else {}
    if GROW not in cells:
        return empty
    table = _per_class(profile, ("realloc_grown_pages", "realloc_grown_moved", "realloc_grown_in_place",
                                 "realloc_grown_in_place_pages"))
    if "realloc_grown_pages" not in table:
        return empty
    if "realloc_grown_in_place" in table:
        grown = table["realloc_grown_in_place"]
    else:
        grown = table["realloc_grown_pages"] - table.get("realloc_grown_moved", 0.0)
    grown = grown.clip(lower=0.0)
    keep = grown.index >= GROWN_CLASS
    blocks = float((grown[keep] * grown.index[keep].to_numpy(dtype=float) * 0.75).sum())
    if blocks <= 0:
        return empty
    mean = {k: (GROW_STEPS[k] + int(cells[k])) / 2 for k in GROW_STEPS if k in cells}
    pages = table["realloc_grown_in_place_pages"][keep].sum() * 4096.0 if "realloc_grown_in_place_pages" in table \
        else math.nan
    if GROW_PAGE not in cells or not pages > 0:
        x = {GROW: blocks / mean[GROW]}
    else:
        # x_page mean_page + x mean_64k = blocks, x_page step_page + x step_64k = pages
        (m1, m2), (s1, s2) = (mean[GROW_PAGE], mean[GROW]), (GROW_STEPS[GROW_PAGE], GROW_STEPS[GROW])
        x2 = (pages * m1 - blocks * s1) / (s2 * m1 - s1 * m2)
        x1 = (blocks - x2 * m2) / m1
        x = {GROW_PAGE: blocks / m1} if x2 <= 0 else {GROW: blocks / m2} if x1 <= 0 else {GROW_PAGE: x1, GROW: x2}
    return pd.DataFrame([{"pattern": k, "size_class": int(cells[k]), "pairs": v} for k, v in x.items() if v > 0],
                        columns=["pattern", "size_class", "pairs"])


def grown_within(profile: pd.DataFrame) -> pd.Series:
    """{size class: reallocs that grew a large block (GROWN_CLASS or more) to it within the block's pages where it
    lay under the baseline}: realloc_grown less realloc_grown_moved less realloc_grown_in_place; empty for a profile
    that does not count the grows past a page in place."""
    table = _per_class(profile, ("realloc_grown", "realloc_grown_moved", "realloc_grown_in_place"))
    if "realloc_grown_in_place" not in table or "realloc_grown" not in table:
        return pd.Series(dtype=float)
    moved = table["realloc_grown_moved"] if "realloc_grown_moved" in table else 0.0
    within = (table["realloc_grown"] - moved - table["realloc_grown_in_place"]).clip(lower=0.0)
    return within[(within.index >= GROWN_CLASS) & (within > 0)]


def grown_within_pages(profile: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """The small grow cells' steps that stand for the program's reallocs that grew a large block within its pages
    where it lay under the baseline (grown_within): such a grow is a move of the block under an allocator whose
    large block has no room past the size asked for (scudo), and costs next to nothing under one that rounds the
    block up to pages or keeps it in a size class with room.

    The cells (GROW_SMALL: blocks of 128 KiB, 1 MiB and 4 MiB grown 256 bytes at a time) cross the same pages a
    step, so what a step costs beyond the smallest cell's step is what it adds with the block: g(m) at each cell's
    mean block m, 0 at the smallest's. A grow of a block of class c (0.75 c) takes g there, linear between the cells,
    none below the smallest, and along the line from the smallest through the largest beyond it: rows of the cells'
    steps, each less one step of the smallest cell (`less_class`). Rows only where the profile counts the grows
    that added pages in place, the costs hold two cells or more, and the largest cell's step is dearer than the
    next one's beyond their standard errors, one-sided at 5%: a cost that grows with the block among blocks past any
    slab class, not the cells' noise or what differs in the small blocks each cell starts from."""
    columns = ["pattern", "size_class", "pairs", "less_class"]
    small = costs[costs["pattern"] == GROW_SMALL] if len(costs) else costs
    if len(small) < 2:
        return pd.DataFrame(columns=columns)
    small = small.assign(size_class=small["size_class"].astype(int)).sort_values("size_class")
    below, top = small.iloc[-2], small.iloc[-1]
    se = math.hypot(*((float(c["added_ns_high"]) - float(c["added_ns_low"])) / (2 * Z) for c in (below, top)))
    if float(top["added_ns"]) - float(below["added_ns"]) <= Z_ONE_SIDED * se:
        return pd.DataFrame(columns=columns)
    classes = small["size_class"].to_numpy()
    means = (GROW_SMALL_STEP + classes) / 2
    added = small["added_ns"].astype(float).to_numpy() - float(small["added_ns"].iloc[0])
    steps = np.zeros(len(classes))
    for c, n in grown_within(profile).items():
        b = 0.75 * float(c)
        if b <= means[0]:
            continue
        if b >= means[-1]:
            steps[-1] += n * (b - means[0]) / (means[-1] - means[0])
            continue
        i = int(np.searchsorted(means, b, side="right")) - 1
        t = (b - means[i]) / (means[i + 1] - means[i])
        steps[i] += n * (1 - t)
        steps[i + 1] += n * t
    keep = (steps > 0) & (added > 0)
    keep[0] = False  # the smallest cell's own step is what the others are taken less
    return pd.DataFrame([{"pattern": GROW_SMALL, "size_class": int(classes[k]), "pairs": float(steps[k]),
                          "less_class": int(classes[0])} for k in np.flatnonzero(keep)], columns=columns)


def _per_class(profile: pd.DataFrame, quantities: tuple) -> pd.DataFrame:
    """The profile's per-class rows of `quantities`, a column each, indexed by size class (absent ones left out)."""
    rows = profile[profile["size_class"].notna() & (profile["size_class"].astype(str) != "")
                   & profile["quantity"].isin(quantities)]
    if rows.empty:
        return pd.DataFrame()
    return rows.assign(size_class=pd.to_numeric(rows["size_class"]).astype(int), value=pd.to_numeric(rows["value"])) \
        .pivot_table(index="size_class", columns="quantity", values="value", aggfunc="sum").fillna(0.0)


def held_small_kib(profile: pd.DataFrame, calls: pd.DataFrame | None = None) -> float:
    """KiB of blocks smaller than GROWN_CLASS live at the program's peak: the profile's peak_live_bytes times the
    share of the bytes it asked for that went to such blocks (each class's allocating calls at three quarters of
    the class, the middle of a power-of-two class); 0 without a peak. The per-call cells hold 256 blocks of a
    class, so they never see what an allocator pays for a heap of small blocks that keeps growing (new slabs, their
    pages and the system calls that map them): stats/cost_terms.py's held term carries that per KiB. `calls`:
    class_calls of the profile, when known."""
    peak = profile_value(profile, "peak_live_bytes") or 0.0
    calls = class_calls(profile) if calls is None else calls
    if peak <= 0 or calls.empty:
        return 0.0
    asked = calls["calls"] * calls.index.to_numpy(dtype=float) * 0.75
    total = float(asked.sum())
    return peak / 1024 * float(asked[calls.index < GROWN_CLASS].sum()) / total if total > 0 else 0.0


# heapcost's placement allocator (harness/workloads/placement.c) when the calls workloads measure it per call under
# this name (docs/design.md: what its own calls add to the profile's placement runs). Never an allocator a user
# chooses (cost_prediction.unrequested).
PLACEMENT_ALLOCATOR = "heapcost-placement"


def placement_shares(profile: pd.DataFrame) -> tuple[float, float]:
    """(order, shuffle): the program's CPU time under heapcost's placement allocator with each class's blocks side
    by side in allocation order, less its time under the baseline, and with them scattered at random among the
    free slots, less side by side, each over its time under the baseline (profile.py's placement runs, taken in
    the same blocks as the baseline's); (NaN, NaN) for a profile without them. The per-call cells keep 256 blocks
    in the caches, so they never see what scattering a program's blocks costs the program's own loads: an
    allocator that randomizes slot choice pays the shuffle share, one that lays blocks in order gains the order
    share where the baseline's placement is the worse (stats/cost_terms.py fits each configuration's part)."""
    ordered, shuffled = profile_value(profile, "placement_ordered_cpu_s"), profile_value(profile, "placement_shuffled_cpu_s")
    base = base_time(profile)
    if ordered is None or shuffled is None or not base or base <= 0:
        return math.nan, math.nan
    return (ordered - base) / base, (shuffled - ordered) / base


# the standard error of a median over the standard error of a mean, for normal errors: the shares are medians
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)


def placement_share_errors(profile: pd.DataFrame) -> tuple[float, float]:
    """(se of the order share, se of the shuffle share): each share's sampling error, from the spread of the log
    CPU-time differences of each turn's placement run and the run it is compared with (placement_ordered_sd_log:
    side by side against the baseline; placement_shuffled_sd_log: scattered against side by side) over the number
    of turns, by the delta method (d share = ratio x d log ratio), widened as the shares are medians. A program of
    a few tens of milliseconds measures its shares with an error the size of the shares themselves (compile: an
    order share of -0.12 with a standard error of about 0.05), and a placement part multiplies that error as it
    multiplies the share. (0, 0) where the profile has no placement runs."""
    runs = profile_value(profile, "placement_runs")
    ordered, shuffled = profile_value(profile, "placement_ordered_cpu_s"), profile_value(profile, "placement_shuffled_cpu_s")
    base = base_time(profile)
    if not runs or ordered is None or shuffled is None or not base or base <= 0:
        return 0.0, 0.0
    scale = MEDIAN_SE_FACTOR / math.sqrt(runs)
    return (ordered / base * (profile_value(profile, "placement_ordered_sd_log") or 0.0) * scale,
            shuffled / base * (profile_value(profile, "placement_shuffled_sd_log") or 0.0) * scale)


def profile_value(profile: pd.DataFrame, quantity: str) -> float | None:
    """A whole-program quantity of the profile (its row without a size class), or None. Asked several times per
    prediction, so read from the columns' arrays rather than through a filtered frame."""
    size_class = profile["size_class"]
    whole = size_class.isna().to_numpy() | (size_class == "").to_numpy()
    at = np.flatnonzero((profile["quantity"] == quantity).to_numpy() & whole)
    return float(pd.to_numeric(profile["value"].iloc[at[:1]]).iloc[0]) if len(at) else None


def base_time(profile: pd.DataFrame) -> float | None:
    """T: the program's CPU time under the baseline (user + system), or its wall time without them."""
    user, system = profile_value(profile, "user_s"), profile_value(profile, "sys_s")
    if user is not None and system is not None and user + system > 0:
        return user + system
    return profile_value(profile, "wall_s")


def _nearest(c: int, classes: list[int]) -> int:
    return min(classes, key=lambda m: (abs(math.log2(max(c, 1)) - math.log2(m)), m))


def class_peaks(profile: pd.DataFrame) -> dict[int, float]:
    """{size class: the most blocks of it live at once} (peak_live_blocks); empty for a profile taken before the
    profile recorded it."""
    rows = profile[(profile["quantity"] == "peak_live_blocks") & profile["size_class"].notna()
                   & (profile["size_class"].astype(str) != "")]
    return {int(float(c)): float(v) for c, v in zip(rows["size_class"], pd.to_numeric(rows["value"]))}


def touched_share(size_class: int, touched_bytes: float | None) -> float:
    """The share of a large block's pages the program can have touched: at most its peak resident set over the
    block's size (1 where the profile records no resident set). A page never touched is never faulted in,
    zeroed or written by either allocator, so the pages cell (every page written) is charged for these alone."""
    if not touched_bytes or touched_bytes <= 0:
        return 1.0
    return min(1.0, float(touched_bytes) / size_class)


def touched_bytes_of(profile: pd.DataFrame) -> float | None:
    """The most bytes a process of the program held resident (maxrss_kb of the profile's timed runs)."""
    kb = profile_value(profile, "maxrss_kb")
    return kb * 1024 if kb else None


def weights(calls: pd.DataFrame, costs: pd.DataFrame, touched_bytes: float | None = None,
            peaks: dict | None = None) -> pd.DataFrame:
    """How many pairs of each measured cell (pattern, class) the program's calls stand for; a large block's pairs
    are its size over the pages cell's, times the share of its pages the program can have touched
    (touched_share; `touched_bytes` None: every page). A class of GROWN_CLASS or more (or of the smallest held
    class, where one below it is measured), up to the largest held class, of which the program holds at most
    HELD_LIVE blocks at once (`peaks`: class_peaks) takes the held cell nearest it, a pair a call: the cells of many live blocks, and the pages cell's fresh block, describe a
    program that empties an allocator's slabs, which one holding so few never does. Of a class's reused pairs
    (a held class's pairs, in its reuse share), the same-size share goes to the LIFO or held cell of one size
    (SAME_SIZE) where the costs have it for that class."""
    small = sorted(int(c) for c in costs.loc[costs["pattern"].isin(SMALL_PATTERNS), "size_class"].unique())
    held = sorted(int(c) for c in costs.loc[costs["pattern"] == HELD, "size_class"].unique())
    pages = costs.loc[costs["pattern"] == PAGES, "size_class"]
    if not small:
        raise HeapcostError("no per-call cost of a small size class is measured: run the calls workloads "
                            "(WORKLOADS=calls) against the baseline first")
    have = set(zip(costs["pattern"], costs["size_class"].astype(int)))
    out: dict[tuple[str, int], float] = {}

    def add(pattern: str, m: int, pairs: float, same: float = 0.0) -> None:
        """`pairs` of the cell (pattern, m), the share `same` of them to its one-size cell where that is measured."""
        if same > 0 and (SAME_SIZE.get(pattern), m) in have:
            out[(SAME_SIZE[pattern], m)] = out.get((SAME_SIZE[pattern], m), 0.0) + pairs * same
            pairs *= 1.0 - same
        if pairs > 0:
            out[(pattern, m)] = out.get((pattern, m), 0.0) + pairs

    for c, r in calls.iterrows():
        same = float(r.get("same_share", 0.0))
        if held and min(GROWN_CLASS, min(held)) <= c <= max(held) and (peaks or {}).get(int(c), math.inf) <= HELD_LIVE:
            add(HELD, _nearest(int(c), held), r["calls"], r["reuse_share"] * same)
            continue
        if c > max(small) and len(pages):
            big = int(pages.iloc[0])
            out[(PAGES, big)] = out.get((PAGES, big), 0.0) + r["calls"] * c / big * touched_share(c, touched_bytes)
            continue
        m = _nearest(int(c), small)
        for pattern, share in ((REUSED, r["reuse_share"]), (NOT_REUSED, 1.0 - r["reuse_share"])):
            if share <= 0:
                continue
            if (pattern, m) not in have:
                raise HeapcostError(f"no per-call cost of the {pattern} pattern at class {m} is measured")
            add(pattern, m, r["calls"] * share, same if pattern == REUSED else 0.0)
    return pd.DataFrame([{"pattern": p, "size_class": c, "pairs": n} for (p, c), n in sorted(out.items())],
                        columns=["pattern", "size_class", "pairs"])


def predict(profile: pd.DataFrame, costs: pd.DataFrame, base_s: float | None = None,
            startup: bool = False) -> Prediction:
    """The predicted ratio of the program's time under the allocator whose per-call `costs` (COST_COLUMNS, in
    nanoseconds added per pair) are given, over the baseline's. With `startup`, each of the profile's processes
    also adds the processes cell's cost (none where the profile counts no process); without that cell it is an
    error, since the prediction asked for could not be made."""
    missing = [c for c in COST_COLUMNS if c not in costs.columns]
    if missing:
        raise HeapcostError(f"the per-call costs lack the column(s) {', '.join(missing)}")
    base_s = base_time(profile) if base_s is None else base_s
    if not base_s or base_s <= 0:
        raise HeapcostError("the profile has no time under the baseline (user_s and sys_s, or wall_s): profile "
                            "the program again")
    calls = class_calls(profile)
    w = weights(fresh_calls(profile, calls), costs, touched_bytes_of(profile), class_peaks(profile))
    if startup:
        started = costs[costs["pattern"] == PROCESSES]
        if started.empty:
            raise HeapcostError("no cost of a process's start-up is measured: run the calls-processes workload "
                                "against the baseline first")
        processes = profile_value(profile, "processes") or 0.0
        w = pd.concat([w, pd.DataFrame([{"pattern": PROCESSES, "size_class": int(started["size_class"].iloc[0]),
                                         "pairs": processes}])], ignore_index=True)
    w = pd.concat([w, grown_pairs(profile, costs), grown_within_pages(profile, costs)], ignore_index=True)
    cells = costs.assign(size_class=costs["size_class"].astype(int)).set_index(["pattern", "size_class"])
    parts = []
    w["less_class"] = w["less_class"].fillna(0) if "less_class" in w else 0
    for r in w.itertuples():
        cell = cells.loc[(r.pattern, r.size_class)]
        added, se = float(cell["added_ns"]), (float(cell["added_ns_high"]) - float(cell["added_ns_low"])) / (2 * Z)
        if r.less_class:  # a step less one step of the same pattern's cell of that class (grown_within_pages)
            less = cells.loc[(r.pattern, int(r.less_class))]
            added -= float(less["added_ns"])
            se = math.hypot(se, (float(less["added_ns_high"]) - float(less["added_ns_low"])) / (2 * Z))
        parts.append({"pattern": r.pattern, "size_class": r.size_class, "pairs": r.pairs,
                      "added_ns": added, "se_ns": se, "added_s": r.pairs * added * 1e-9})
    parts = pd.DataFrame(parts, columns=["pattern", "size_class", "pairs", "added_ns", "se_ns", "added_s"])
    added = float(parts["added_s"].sum()) if len(parts) else 0.0
    sd = math.sqrt(float(((parts["pairs"] * parts["se_ns"] * 1e-9) ** 2).sum())) if len(parts) else 0.0
    # T's own uncertainty: the standard error of the log of the timed runs' CPU time, carried by added / T
    t_se = base_se_log(profile)
    half = Z * math.hypot(sd / base_s, added / base_s * t_se)
    ratio = 1 + added / base_s
    return Prediction(ratio, ratio - half, ratio + half, added, base_s, int(calls["calls"].sum()), parts, sd,
                      held_small_kib(profile, calls), *placement_shares(profile), *placement_share_errors(profile))


def base_se_log(profile: pd.DataFrame) -> float:
    """The standard error of log T, in units whose Z multiple is its 95% half-width: the spread of the profile's
    timed runs (cpu_sd_log) over their number's root, or, where the runs came in blocks spread over the
    profile's run and the blocks' means lie further apart than that, the blocks' spread (cpu_sd_log_blocks) over
    their number's root, widened from a t on blocks - 1 degrees of freedom to the normal's scale (few blocks
    know their spread poorly). A profile of one block (as every profile made before blocks) has the first."""
    runs, sd_log = profile_value(profile, "timed_runs"), profile_value(profile, "cpu_sd_log")
    within = sd_log / math.sqrt(runs) if runs and sd_log else 0.0
    blocks, sd_blocks = profile_value(profile, "timed_blocks"), profile_value(profile, "cpu_sd_log_blocks")
    if not blocks or blocks < 2 or not sd_blocks:
        return within
    between = sd_blocks / math.sqrt(blocks) * t_quantile(blocks - 1) / Z
    return max(within, between)


def _pooled_spread(means: list[float], sds: list[float], counts: list[float]) -> float:
    """The standard deviation of every sample of several groups taken as one (each group's mean, standard
    deviation and count): the groups' own spreads and how far their means lie apart, on total - 1 degrees of
    freedom; 0 with a single sample."""
    n = float(sum(counts))
    if n < 2:
        return 0.0
    centre = sum(c * m for m, c in zip(means, counts)) / n
    ss = sum((c - 1) * sd ** 2 + c * (m - centre) ** 2 for m, sd, c in zip(means, sds, counts))
    return math.sqrt(max(ss, 0.0) / (n - 1))


def _with_values(profile: pd.DataFrame, values: dict) -> pd.DataFrame:
    """The profile with these whole-program quantities set (a row each, added where absent)."""
    size_class = profile["size_class"]
    whole = size_class.isna() | (size_class.astype(str) == "")
    out = profile[~(profile["quantity"].isin(list(values)) & whole)]
    rows = pd.DataFrame([{"quantity": q, "size_class": None, "value": v} for q, v in values.items()])
    return pd.concat([out, rows.astype({"value": float})], ignore_index=True)[list(profile.columns)]


def pooled_profile(profiles: list) -> pd.DataFrame:
    """One profile of a program from several of its profiles on one processor kind, oldest first: the newest's
    counts (the profiler's latest quantities), and the times pooled, since each profile is one sample of the
    machine's state and the baseline moves between them by more than within one (the same sqlite command gave
    0.338 s and 0.240 s of CPU in two profiles). T: the mean of the profiles' log T, each weighted by its blocks
    (timed_blocks, 1 where absent), user_s, sys_s and wall_s scaled to it from the newest's; timed_runs and
    timed_blocks summed; cpu_sd_log_blocks the blocks' spread taken as one sample, the profiles' own and how far
    their T lie apart, so that base_se_log carries the spread between profiles. The placement shares: the mean of
    each profile's log ratios (side by side over the baseline, scattered over side by side), weighted by its
    placement_runs, their turns' spread pooled the same way. One profile is returned as it is."""
    profiles = [p for p in profiles if p is not None]
    if len(profiles) < 2:
        return profiles[0] if profiles else None
    newest = profiles[-1]
    base = [(base_time(p), profile_value(p, "timed_blocks") or 1.0, profile_value(p, "cpu_sd_log_blocks") or 0.0,
             profile_value(p, "timed_runs") or 0.0) for p in profiles]
    base = [b for b in base if b[0] and b[0] > 0]
    t_new = base_time(newest)
    if len(base) < 2 or not t_new or t_new <= 0:
        return newest
    logs, blocks, sds = [math.log(b[0]) for b in base], [b[1] for b in base], [b[2] for b in base]
    t = math.exp(sum(b * m for m, b in zip(logs, blocks)) / sum(blocks))
    values = {q: profile_value(newest, q) * t / t_new for q in ("user_s", "sys_s", "wall_s")
              if profile_value(newest, q) is not None}
    values.update(timed_runs=sum(b[3] for b in base), timed_blocks=sum(blocks),
                  cpu_sd_log_blocks=_pooled_spread(logs, sds, blocks))
    turns = []
    for p in profiles:
        runs, b = profile_value(p, "placement_runs"), base_time(p)
        ordered, shuffled = profile_value(p, "placement_ordered_cpu_s"), profile_value(p, "placement_shuffled_cpu_s")
        if runs and b and b > 0 and ordered and shuffled:
            turns.append((runs, math.log(ordered / b), math.log(shuffled / ordered),
                          profile_value(p, "placement_ordered_sd_log") or 0.0,
                          profile_value(p, "placement_shuffled_sd_log") or 0.0))
    if turns:
        runs = [x[0] for x in turns]
        order_log = sum(r * x[1] for r, x in zip(runs, turns)) / sum(runs)
        shuffle_log = sum(r * x[2] for r, x in zip(runs, turns)) / sum(runs)
        values.update(placement_runs=sum(runs), placement_ordered_cpu_s=t * math.exp(order_log),
                      placement_shuffled_cpu_s=t * math.exp(order_log + shuffle_log),
                      placement_ordered_sd_log=_pooled_spread([x[1] for x in turns], [x[3] for x in turns], runs),
                      placement_shuffled_sd_log=_pooled_spread([x[2] for x in turns], [x[4] for x in turns], runs))
    return _with_values(newest, values)


@dataclass
class PairPrediction:
    ratio: float
    low: float
    high: float
    with_: Prediction | None     # None: that side is the baseline itself (it adds nothing)
    without: Prediction | None


def predict_pair(profile: pd.DataFrame, costs_with: pd.DataFrame | None, costs_without: pd.DataFrame | None,
                 base_s: float | None = None, startup: bool = False, terms: tuple = (None, None)) -> PairPrediction:
    """The predicted ratio of one configuration's time over another's, both measured per call against the same
    baseline (None for a side that is the baseline): (T + added_with) / (T + added_without). Its interval, on the
    log scale, adds the two added times' variances (their per-call intervals, independent) and T's, which
    moves both sides and mostly cancels: d log ratio / dT = 1 / (T + added_with) - 1 / (T + added_without).
    `terms`: each side's terms beyond the per-call cells (stats/cost_terms.Premium, None for none), added to
    that side's time with their standard error, as `cost` adds them to a configuration against the baseline."""
    sides = [predict(profile, c, base_s, startup) if c is not None else None for c in (costs_with, costs_without)]
    sides = [t.applied(p) if p is not None and t is not None else p for p, t in zip(sides, terms)]
    base = next((p.base_s for p in sides if p is not None), None)
    if base is None:  # both sides the baseline
        return PairPrediction(1.0, 1.0, 1.0, None, None)
    totals = [base + (p.added_s if p is not None else 0.0) for p in sides]
    if min(totals) <= 0:
        raise HeapcostError("a configuration's predicted time is not positive: its per-call costs take away more "
                            "than the program's whole time under the baseline")
    var = sum((p.added_sd_s / t) ** 2 for p, t in zip(sides, totals) if p is not None)
    var += (base * base_se_log(profile) * (1 / totals[0] - 1 / totals[1])) ** 2
    ratio = totals[0] / totals[1]
    half = Z * math.sqrt(var)
    return PairPrediction(ratio, ratio * math.exp(-half), ratio * math.exp(half), *sides)


# ---- the model's own error, from the programs it was checked on ----
#
# The per-call intervals and the profile's timed runs say how well the model's inputs are known, not how well the
# model describes a program: a program that reserves a large buffer and touches few of its pages, or one whose
# blocks are freed far apart, misses by more than any input's error (the cost check shows it). The model's own
# error is read off the programs it was checked on, registered before they were measured: each residual is
# log(measured) - log(predicted). A new program's interval is a split-conformal one: the residuals of the other
# programs, taken by their size, give the half-width that held for all but 5% of them, and the interval is the
# prediction times exp(+-) that half-width, widened by the profile's own sampling error in quadrature. With n
# residuals, the ceil((n + 1) * 0.95)-th smallest is that half-width, which needs n >= 19: a configuration with
# fewer takes its family's residuals, and a family with fewer every configuration's.

LEVEL = 0.95
RESIDUAL_COLUMNS = ["program", "allocator", "family", "processor", "log_error"]


def min_residuals(level: float = LEVEL) -> int:
    """The fewest residuals whose conformal quantile at `level` is finite: ceil((n + 1) level) <= n."""
    n = 1
    while math.ceil((n + 1) * level) > n:
        n += 1
    return n


def conformal_half_width(residuals, level: float = LEVEL) -> float | None:
    """The split-conformal half-width on the log scale: the ceil((n + 1) level)-th smallest |residual|, or None
    where there are too few residuals for one (min_residuals)."""
    r = sorted(abs(float(x)) for x in residuals if x is not None and not math.isnan(float(x)))
    k = math.ceil((len(r) + 1) * level)
    return r[k - 1] if r and k <= len(r) else None


@dataclass(frozen=True)
class ModelError:
    half_log: float | None   # the conformal half-width on the log scale (None: too few residuals anywhere)
    scope: str               # whose residuals gave it: "configuration", "family" or "every configuration"
    residuals: int           # how many
    programs: int            # from how many programs


def model_error(residuals: pd.DataFrame, allocator: str, family: str | None = None, leave_out: str | None = None,
                level: float = LEVEL) -> ModelError:
    """The model's own error for a configuration: the conformal half-width of the residuals (RESIDUAL_COLUMNS) of
    every program but `leave_out`, the configuration's own where there are enough, else its family's, else every
    configuration's."""
    done = residuals[residuals["log_error"].notna()] if len(residuals) else residuals
    if leave_out is not None and len(done):
        done = done[done["program"] != leave_out]
    need = min_residuals(level)
    scopes = [("configuration", done[done["allocator"] == allocator] if len(done) else done)]
    if family and len(done):
        scopes.append(("family", done[done["family"] == family]))
    scopes.append(("every configuration", done))
    for scope, sub in scopes:
        if len(sub) >= need:
            return ModelError(conformal_half_width(sub["log_error"], level), scope, int(len(sub)),
                              int(sub["program"].nunique()))
    return ModelError(None, "too few programs checked", int(len(done)), int(done["program"].nunique()) if len(done) else 0)


def with_model_error(ratio: float, low: float, high: float, error: ModelError) -> tuple[float, float]:
    """The prediction interval for a new program: the inputs' interval (low, high, on the log scale about the
    ratio) and the model's own error added in quadrature. Unchanged where the model's error is unknown."""
    return (low, high) if error.half_log is None else widened(ratio, low, high, error.half_log)


def widened(ratio: float, low: float, high: float, half_log: float) -> tuple[float, float]:
    """The interval (low, high) about `ratio` with `half_log` added in quadrature to each side's half-width on
    the log scale (unchanged for a half-width that is not positive)."""
    if not half_log > 0 or ratio <= 0:
        return low, high
    hi_half = math.log(high) - math.log(ratio) if high > ratio else 0.0
    lo_half = math.log(ratio) - math.log(low) if 0 < low < ratio else hi_half
    return ratio * math.exp(-math.hypot(lo_half, half_log)), ratio * math.exp(math.hypot(hi_half, half_log))


# ---- the user's machine: a new machine of the kind ----
#
# The per-call costs and the checked programs' misses come from the machines that measured them; the machine a
# user runs `cost` for is another machine of the kind, and machines of one kind differ in an allocator's ratio by
# more than one machine's runs do (stats/prediction.machine_spread: the between-machine spread, estimated jointly
# over the debates' cells measured on two machines of a kind or more). A prediction for a new program on a new
# machine adds that spread's t-quantile in quadrature on the log scale (`widened`), for the new machine's own
# deviation and for that of the machines the prediction was measured on. The spread is measured on
# the debates' ratios and taken whole for any ratio: for a program that allocates little, so that its ratio is
# near 1, it overstates the machine's part.


def t_quantile(df: float, level: float = LEVEL) -> float:
    """The two-sided t quantile at `level` on `df` degrees of freedom (the normal's without a finite df). The
    95% ones of 1 to 10 degrees of freedom are kept here, so that an answer of `cost` need not import scipy."""
    if not (df and df > 0 and math.isfinite(df)):
        return Z
    if level == LEVEL and float(df).is_integer() and 1 <= df <= len(T95):
        return T95[int(df) - 1]
    from analysis.stats.random_effects import quantile

    return quantile(df, level)


T95 = (12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934, 2.5705818356363146,
       2.4469118511449786, 2.364624251592784, 2.306004135204166, 2.262157162798205, 2.228138851986274)  # scipy's


def machine_half_width(tau: float, quantile: float, measured_machines: int = 1) -> float:
    """The half-width on the log scale that a new machine adds (between-machine SD `tau`, `quantile` the t
    quantile of its degrees of freedom, t_quantile): the deviation of the new machine from the kind's mean, tau,
    and the measured machines' mean deviation, tau over the root of their number (the per-call costs and the
    checked programs were measured on those machines, so the prediction sits where they sit, not at the kind's
    mean)."""
    if not tau > 0:
        return 0.0
    return quantile * tau * math.sqrt(1 + 1 / max(1, int(measured_machines)))

