"""What `cache_info()` reports about one jitted function's cache."""
from __future__ import annotations

from dataclasses import dataclass, field

from .split import SplitReport

__all__ = ["CacheStats"]


@dataclass
class CacheStats:
    """What `cache_info()` reports: calls served from the cache, compilations, evictions, the
    entries held and the most it holds (`None`: unbounded), and which inputs changed; the calls
    made under torch.autocast are counted apart, in `autocast`."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    replans: int = 0  # entries compiled again without an executor that failed its run-time check
    # calls of a new 0/1 variant of a symbolic entry run eagerly until they paid for its compile (squall.runtime.ski_rental); no hits
    eager_before_compile: int = 0
    guard_failures: int = 0  # calls whose value guards failed (squall.frontend.speculation), variants compiled or not
    size: int = 0
    limit: int | None = None
    changes: dict[str, int] = field(default_factory=dict)  # input label -> times it changed
    # a module that runs its forward eagerly with compiled children: why, and the children (squall.runtime.split)
    split: SplitReport | None = None
    # the calls made under torch.autocast, per autocast state: the stats of that state's own jitted function
    autocast: dict[tuple, CacheStats] = field(default_factory=dict)
