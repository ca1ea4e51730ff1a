"""OpInfos: for every torch-language op, sample inputs, error inputs, a reference, directives.

Each module here is named like the `squall.ltorch` module whose ops it covers (softmax.py,
pooling.py, ...) and defines `opinfos: list[OpInfo]`; `all_opinfos()` collects them. One parametrized
test (tests/test_ops.py) runs every sample through every executor configuration and
compares with the torch reference; another checks every error input.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pkgutil
import torch

from squall.extend import OperatorExecutor
from squall.market.torch_executor import PRIM_IMPLS

# one per ltorch module, named like it (tests/test_ops.py checks the mirror)
FAMILIES = tuple(sorted(m.name for m in pkgutil.iter_modules([os.path.dirname(__file__)])))

# The dtypes OpInfos are run for (as the issue asks): ops declare which they support.
FLOATING = (torch.float32, torch.float64, torch.bfloat16)
ALL_TYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool)
NUMERIC = (torch.float32, torch.float64, torch.bfloat16, torch.int64)
INTEGRAL = (torch.int64, torch.bool)


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        def show(x):
            if isinstance(x, torch.Tensor):
                return f"T{list(x.shape)}:{str(x.dtype).removeprefix('torch.')}"
            if isinstance(x, (list, tuple)):
                return type(x)(show(v) for v in x)
            return x

        return f"SampleInput(args={[show(a) for a in self.args]}, kwargs={ {k: show(v) for k, v in self.kwargs.items()} })"


@dataclass
class ErrorInput:
    sample: SampleInput
    exc_type: type[BaseException]
    match: str  # a regex the message must contain
    torch_raises: bool = True  # torch itself rejects this input with the same exception type
    # exc_type NotModelled (squall.ltorch.unmodelled): torch takes this input and squall does not
    # model it, so the jitted call runs eagerly with a warning matching `match` (tests/test_ops.py)


@dataclass
class Directive:
    """Skip (reason given) some (executor configuration, dtype) combinations of an op."""

    reason: str
    configs: tuple[str, ...] = ()  # empty: every configuration
    dtypes: tuple[torch.dtype, ...] = ()  # empty: every dtype

    def applies(self, config: str, dtype: torch.dtype) -> bool:
        return (not self.configs or config in self.configs) and (not self.dtypes or dtype in self.dtypes)


@dataclass
class OpInfo:
    name: str
    op: Callable  # what the compiled function calls (a torch callable, or a lambda over one)
    sample_inputs: Callable[[torch.dtype, str], Iterable[SampleInput]]
    dtypes: tuple[torch.dtype, ...] = FLOATING
    error_inputs: Callable[[str], Iterable[ErrorInput]] | None = None
    reference: Callable | None = None  # defaults to `op` run eagerly
    symbol: str | None = None  # the ltorch op id this covers, for the coverage count
    directives: tuple[Directive, ...] = ()
    tolerances: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)  # dtype -> (rtol, atol)
    random: bool = False  # outputs are random: compare shapes and dtypes, not values

    def ref(self) -> Callable:
        return self.reference or self.op

    def skip_reason(self, config: str, dtype: torch.dtype) -> str | None:
        for d in self.directives:
            if d.applies(config, dtype):
                return d.reason
        return None


def make_tensor(shape, dtype: torch.dtype, device: str = "cpu", *, low: float | None = None, high: float | None = None, noncontiguous: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
    """A deterministic random tensor (torch.testing.make_tensor with a fixed seed per call site)."""
    t = torch.testing.make_tensor(shape, dtype=dtype, device=device, low=low, high=high, noncontiguous=noncontiguous)
    return t


def other_device(device: str) -> str:
    """A second device a tensor on `device` can move to here: "meta" from the CPU (eager moves
    there; a result's shape, dtype and device are compared, a meta tensor has no values), the CPU
    from CUDA."""
    return "meta" if torch.device(device).type == "cpu" else "cpu"


def prims_only_executor() -> OperatorExecutor:
    """Torch for prims only: every ltorch op must then run through its decomposition."""
    ex = OperatorExecutor("torch_prims", supports_autograd=True)
    for prim_id, fn in PRIM_IMPLS.items():
        ex.register_implementation(prim_id, fn)
    return ex


def all_opinfos() -> list[OpInfo]:
    found: list[OpInfo] = []
    for family in FAMILIES:
        found.extend(importlib.import_module(f"opinfos.{family}").opinfos)
    names = [o.name for o in found]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise RuntimeError(f"OpInfo names repeat: {sorted(dupes)}")
    return found


def tensors_in(x: Any) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_flatten

    return [v for v in tree_flatten(x)[0] if isinstance(v, torch.Tensor)]


# --- samples written as (shape, args, kwargs) forms, shared by the shape-like families ---------


def tensor(shape, dtype=torch.float32, device="cpu", **kw):
    """A sample tensor (float32 on the CPU unless told)."""
    return make_tensor(shape, dtype, device, **kw)


def forms_samples(*forms):
    """A sample generator from (shape, args, kwargs[, noncontiguous]) forms; the tensor comes first."""

    def samples(dtype, device):
        for form in forms:
            shape, args, kwargs = form[:3]
            nc = len(form) > 3 and form[3]
            yield SampleInput((tensor(shape, dtype, device, noncontiguous=nc), *args), dict(kwargs))

    return samples


def forms_errors(*forms):
    """Error inputs from (shape, args, kwargs, exception, regex) forms, all rejected by torch too."""

    def errors(device):
        for shape, args, kwargs, exc, match in forms:
            yield ErrorInput(SampleInput((tensor(shape, device=device), *args), dict(kwargs)), exc, match)

    return errors
