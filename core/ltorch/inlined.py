"""torch functions written in Python that squall traces through, call by call, instead of running
them as one opaque call: torch.nn.functional.multi_head_attention_forward (nn.MultiheadAttention,
nn.TransformerEncoderLayer, torchvision's ViT). Its first line hands any call with a traced tensor
or under a torch function mode to `__torch_function__`, which is how squall sees it whole; the copy
kept here is the same body with that check answering False, so its own calls (linear, softmax,
scaled_dot_product_attention) are traced as the program's and differentiated by squall."""
from __future__ import annotations

import types
from collections.abc import Callable

import torch

__all__ = ["INLINED"]


def _without_torch_function_check(fn: Callable) -> Callable:
    """`fn`'s own code, run with a `has_torch_function` that answers False."""
    namespace = dict(fn.__globals__)
    namespace["has_torch_function"] = lambda *_: False
    body = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    body.__kwdefaults__ = fn.__kwdefaults__
    return body


INLINED: dict[Callable, Callable] = {
    torch.nn.functional.multi_head_attention_forward: _without_torch_function_check(torch.nn.functional.multi_head_attention_forward),
}
