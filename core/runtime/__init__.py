"""Call time: what happens when a jitted function is called, after the entry point's key lookup.

- `entry`: `CacheEntry`, everything about one input signature in one record, and the
  compilation's one guard set (`squall.guard_set`) completed for the cache;
- `cache`: the entries of one jitted function, the dict the hot path reads, one lock, and
  `swap`, the one place an entry's program changes;
- `runner`: what an entry's slot calls: its one check, then its program; a rejected call is
  reported as a `GuardFailure` (kind, label, site);
- `policy`: what a failure leads to (another variant, set aside, split, eager, replan);
- `variants`: the variants of an entry whose program has value guards;
- `exclusions`: the executors kept out of an entry after a fault, as a priority list;
- `calls`: `Runtime`, which compiles on a miss and carries out the policy's answers;
- `stats`: what `cache_info()` reports.
"""
