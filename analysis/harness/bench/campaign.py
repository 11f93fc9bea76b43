"""The throwaway lockstep campaign that the bench parts running their own pairs (interference, layout) share."""
import tempfile
from contextlib import contextmanager
from pathlib import Path

from analysis.errors import HeapcostError


@contextmanager
def bench_campaign(allocators, workload: str, seed: int, force, part: str, extra_allocators=None):
    """A smoke-profile lockstep campaign in a throwaway runs directory, for a bench part that runs its own
    pairs: its workloads built, the campaign lock held and the harness moved off the pairs' CPU."""
    from analysis.harness.timing import measure
    from analysis.harness.process import launcher, quiet

    with tempfile.TemporaryDirectory(prefix="heapcost-bench-") as tmp:
        camp = measure.Campaign(profile="smoke", allocators=",".join(allocators), workloads=workload,
                                extra_allocators=extra_allocators, seed=seed, runs_dir=Path(tmp), progress=False,
                                force=force, protocol="lockstep", pin="auto")
        if camp.cpu is None:
            raise HeapcostError(f"the {part} bench pins its pairs: it needs pin=auto to find a CPU")
        for wl in camp.workloads.values():
            for variant in sorted({camp.resolved[a].allocator.variant for a in allocators}):
                wl.prepare(variant)
        with quiet.CampaignLock(Path(tmp), force), launcher.pinned(camp.cpu):
            yield camp
