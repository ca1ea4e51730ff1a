"""Survey: PyTorch's own op_db (torch.testing._internal.common_methods_invocations) through squall.jit.

Run: pip install expecttest && SQUALL_EXECUTORS=torch python bench/op_db_survey.py [--samples N]
For every op_db entry with float32 CPU support, the first N samples run eagerly and compiled;
each entry counts as ok, opaque (matches, but some call ran as an opaque torch call),
data-dependent (squall.DataDependentError: an output shape depends on values), value-dependent
(control flow needed a tensor's value), MISMATCH or error; the last two are listed. Random ops
(rand*, dropout, normal, multinomial, ...) and empty* show as MISMATCH: their values differ from
eager's by design.
"""
from __future__ import annotations

import argparse
import collections
import time
import warnings

import torch

import squall
from squall.ltorch.base import DataDependentError


def survey(samples_per_op: int) -> tuple[collections.Counter, dict[str, list[tuple[str, str]]]]:
    from torch.testing._internal.common_methods_invocations import op_db

    counts: collections.Counter = collections.Counter()
    listed: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for info in op_db:
        if torch.float32 not in info.supported_dtypes("cpu"):
            counts["no float32"] += 1
            continue
        status = "ok"
        for s in list(info.sample_inputs("cpu", torch.float32, requires_grad=False))[:samples_per_op]:
            op = info.op
            try:
                expected = op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 - a sample eager rejects says nothing about squall
                continue
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    actual = squall.jit(lambda x, *a, **k: op(x, *a, **k))(s.input, *s.args, **s.kwargs)
                torch.testing.assert_close(actual, expected, equal_nan=True, atol=1e-4, rtol=1e-4)
                if any(issubclass(w.category, squall.SquallWarning) and "opaque" in str(w.message) for w in caught):
                    status = "opaque"
            except DataDependentError:
                status = "data-dependent"
                break
            except AssertionError as e:
                status = "MISMATCH"
                listed[status].append((info.name, str(e).splitlines()[0][:120]))
                break
            except Exception as e:  # noqa: BLE001 - every failure is what the survey reports
                message = str(e).splitlines()[0] if str(e) else ""
                status = "value-dependent" if "needs the value of tensor" in message else "error"
                if status == "error":
                    listed[status].append((info.name, f"{type(e).__name__}: {message[:150]}"))
                break
        counts[status] += 1
    return counts, listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    counts, listed = survey(args.samples)
    print(dict(counts), f"({time.perf_counter() - start:.0f} s)")
    for status, entries in listed.items():
        print(f"== {status} ({len(entries)})")
        for name, message in entries:
            print(f"  {name}: {message}")


if __name__ == "__main__":
    main()
