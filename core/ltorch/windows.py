"""Sliding windows, shared by convolution, pooling and fold/unfold; never seen in traces."""
from __future__ import annotations

import torch

from .. import prims
from .helpers import check, is_tensor

__all__ = ["batched", "unbatch", "sizes_text", "windows", "window_counts"]
from ..proxies import TensorProxy
from ..symbolic import SymInt


def sizes_text(values) -> str:
    """Sizes as torch's messages print them: "2 x 3"."""
    return " x ".join(map(str, values))


def batched(name: str, input, n: int) -> tuple[TensorProxy, bool]:
    """`input` with a batch dimension (added when unbatched), and whether one was added."""
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(
        input.ndim in (n + 1, n + 2),
        lambda: f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of size: {list(input.shape)}",
        RuntimeError,
    )
    if input.ndim == n + 1:
        return prims.reshape(input, (1, *input.shape)), True
    return input, False


def unbatch(out: TensorProxy, added: bool) -> TensorProxy:
    """`out` without the batch dimension `batched` added."""
    return prims.reshape(out, out.shape[1:]) if added else out


def windows(x: TensorProxy, kernel, stride, padding, dilation, sizes, fill) -> TensorProxy:
    """(N, C, *spatial) -> (N, C, *out, *kernel): every pooling window, padded with `fill`."""
    for i, (k, s, p, d, out) in enumerate(zip(kernel, stride, padding, dilation, sizes)):
        dim = 2 + i
        span = d * (k - 1) + 1
        # ceil_mode's last window may run past the right padding: pad enough for it
        right = max(p, (out - 1) * s + span - x.shape[dim] - p)
        if p or right:
            config = [(0, 0, 0)] * x.ndim
            config[dim] = (p, right, 0)
            x = prims.pad(x, fill, config)
        x = prims.unfold(x, dim, span, s)
        if x.shape[dim] != out:
            x = prims.slice(x, [0] * x.ndim, [out if j == dim else m for j, m in enumerate(x.shape)], [1] * x.ndim)
        if d > 1:
            x = prims.slice(x, [0] * x.ndim, list(x.shape), [1] * (x.ndim - 1) + [d])
    return x


def window_counts(L, out, k: int, s: int, p: int, count_include_pad: bool, ceil_mode: bool, device):
    """How many elements each of a dimension's `out` averaging windows covers (torch's avg_pool
    rule: the padding counts where `count_include_pad`, ceil_mode's overhang past it never does):
    one number where every window covers as many, else an int64 (out,) tensor the program
    computes at the call's sizes, so a symbolic size is never read (a compile per image size)."""
    if not ceil_mode and (count_include_pad or p == 0):
        return k  # every window lies inside the (padded) input: none is cut short
    if type(L) is not SymInt and type(out) is not SymInt:
        counts = []
        for o in range(out):
            start = o * s - p
            end = min(start + k, L + p)
            if not count_include_pad:
                start, end = max(start, 0), min(end, L)
            counts.append(end - start)
        if all(c == counts[0] for c in counts):
            return counts[0]
    start = prims.iota(out, start=-p, step=s, device=device, dtype=torch.int64)
    end = prims.minimum(prims.add(start, k), L + p)
    if not count_include_pad:
        start, end = prims.maximum(start, 0), prims.minimum(end, L)
    return prims.sub(end, start)
