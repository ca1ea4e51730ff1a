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


class _LiveGlobals(dict):
    """A function's globals read through to its module's, at each read: holds only what it overrides
    (and `__builtins__`, which CPython reads from the dict itself), so a later rebinding in the
    module (a user's monkeypatch of `torch.nn.functional.softmax`) reaches the copy, as it reaches
    the original."""

    def __init__(self, module_globals: dict, overrides: dict):
        super().__init__(overrides, __builtins__=module_globals["__builtins__"])
        self.module_globals = module_globals

    def __missing__(self, name: str):
        return self.module_globals[name]


def _without_torch_function_check(fn: Callable) -> Callable:
    """`fn`'s own code, run with a `has_torch_function` that answers False."""
    namespace = _LiveGlobals(fn.__globals__, {"has_torch_function": lambda *_: False})
    body = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    body.__kwdefaults__ = fn.__kwdefaults__
    return body


INLINED: dict[Callable, Callable] = {
    torch.nn.functional.multi_head_attention_forward: _without_torch_function_check(torch.nn.functional.multi_head_attention_forward),
}
