"""Logs for the curious: the compile records, live, through Python's `logging`.

    SQUALL_LOGS=plan,fusion,cache,plugins python train.py
    squall.set_logs("plan,fusion")        # or set_logs(None) to stop

Each topic is a logger under `squall` (`squall.plan`, `squall.fusion`, ...), so a program's
own logging configuration (levels, handlers, formats) applies; `set_logs` only sets the
topics' levels to INFO and, where the program has configured no handler at all, adds one
that prints to stderr. Messages are built only for topics that are enabled, and only when
something compiles: a cached call never logs.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from ..market.fusion import LEFT_OUT

__all__ = ["TOPICS", "set_logs", "ENV_VAR"]

ENV_VAR = "SQUALL_LOGS"
TOPICS = {
    "compile": "each compilation: function, inputs, outcome, time per stage",
    "cache": "cache misses and what changed since the last compilation",
    "plan": "each operation: the executor that took it, who declined and why",
    "fusion": "fusion regions and what fusion executors handed back",
    "plugins": "installed executors, availability, plugin errors",
    "traces": "every stage's trace, as Python",
    "code": "the generated source",
}
ROOT = logging.getLogger("squall")
# topics print only when asked for (set_logs, SQUALL_LOGS, or a level set on their logger):
# a program that logs at INFO itself does not get every trace squall compiles
ROOT.setLevel(logging.WARNING)
_handler: logging.Handler | None = None
_plugins_logged = False


def _logger(topic: str) -> logging.Logger:
    return logging.getLogger(f"squall.{topic}")


def set_logs(topics: str | Iterable[str] | None) -> None:
    """Log `topics` ("plan,fusion", a list, "all", or None/"" for none) at INFO under `squall.<topic>`."""
    global _handler
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    wanted = set(topics or ())
    if "all" in wanted:
        wanted = set(TOPICS)
    unknown = wanted - set(TOPICS)
    if unknown:
        raise ValueError(f"squall: unknown log topic(s) {', '.join(sorted(unknown))}; topics: {', '.join(TOPICS)}, all")
    for topic in TOPICS:
        _logger(topic).setLevel(logging.INFO if topic in wanted else logging.NOTSET)
    if wanted and _handler is None and not logging.getLogger().handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        ROOT.addHandler(_handler)
        ROOT.propagate = False  # no handler above us to duplicate the output; ours prints it
    elif not wanted and _handler is not None:
        ROOT.removeHandler(_handler)
        ROOT.propagate = True
        _handler = None


def active() -> bool:
    """Whether any topic would print (cheap: the compile path asks it once)."""
    return any(_logger(t).isEnabledFor(logging.INFO) for t in TOPICS)


def log_compilation(rec: dict[str, Any], compilation: Any) -> None:
    """Log one compilation record on the enabled topics."""
    global _plugins_logged
    name = rec.get("function")
    log = _logger("plugins")
    if log.isEnabledFor(logging.INFO) and not _plugins_logged:
        _plugins_logged = True
        for ex in rec["executors"]["status"]:
            log.info("%s %s: %s", ex["name"], ex["version"] or "", "available" if ex["available"] else f"unavailable ({ex['reason']})")
    log = _logger("compile")
    if log.isEnabledFor(logging.INFO):
        inputs = ", ".join(f"{i['dtype']}{i['shape']}" if i.get("tensor") else i["type"] for i in rec["inputs"])
        seconds = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in rec.get("seconds", {}).items())
        log.info("%s(%s): %s in %.1f ms (%s), executors %s from %s", name, inputs, rec["outcome"], rec["compile_seconds"] * 1e3,
                 seconds, " > ".join(rec["executors"]["order"]), rec["executors"]["source"])
        for w in rec["warnings"]:
            log.info("%s: warning: %s", name, w["message"])
        if "error" in rec:
            log.info("%s: %s", name, rec["error"]["traceback"].rstrip())
    log = _logger("cache")
    if log.isEnabledFor(logging.INFO):
        r = rec["recompilation"]
        changed = ", ".join(f"{k} x{v}" for k, v in r["changes"].items()) or "nothing yet (first compilation)"
        log.info("%s: cache miss, compilation %d; inputs that changed: %s", name, r["compilations"], changed)
    for plan in rec.get("plans", ()):
        log = _logger("plan")
        if log.isEnabledFor(logging.INFO):
            log.info("%s: %s", plan["trace"], plan["provenance"])
            for op, depth, executor, declined, region in plan["decisions"]:
                why = "; ".join(f"{n}: {r}" for n, r in declined)
                log.info("%s%s -> %s%s", "  " * (depth + 1), op, executor or "(decomposed)", f"  (declined: {why})" if why else "")
            for error in plan["errors"]:
                log.info("  plugin error: %s", error)
        log = _logger("fusion")
        if log.isEnabledFor(logging.INFO):
            for i, region in enumerate(plan["regions"]):
                reused = " (reused)" if region["reused"] else ""
                log.info("%s: region %d by %s%s: %s", plan["trace"], i, region["executor"], reused, ", ".join(region["ops"]))
            for op, depth, executor, declined, region in plan["decisions"]:
                for n, r in declined:
                    if LEFT_OUT in r:
                        log.info("%s: %s handed back %s: %s", plan["trace"], n, op, r)
    log = _logger("traces")
    if log.isEnabledFor(logging.INFO) and compilation is not None:
        for trace in compilation:
            log.info("%s", trace)
    log = _logger("code")
    if log.isEnabledFor(logging.INFO) and rec.get("source"):
        log.info("%s", rec["source"])


def log_failure(rec: dict[str, Any], failure: dict[str, Any]) -> None:
    """Log a first call that failed."""
    log = _logger("compile")
    if log.isEnabledFor(logging.INFO):
        log.info("%s: first call failed: %s", rec.get("function"), failure["error"]["traceback"].rstrip())


if os.environ.get(ENV_VAR):
    try:
        set_logs(os.environ[ENV_VAR])
    except ValueError as e:  # a typo in an environment variable must not stop the import
        logging.getLogger("squall").warning("%s (from $%s)", e, ENV_VAR)
