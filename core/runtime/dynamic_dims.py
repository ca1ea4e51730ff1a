"""Which tensor dimensions of a jitted function's arguments are symbolic sizes.

The policy (`squall.jit(fn, dynamic=...)`, `$SQUALL_DYNAMIC`, `dynamic` under `[tool.squall]`):

- "auto" (the default): the first call of a signature is compiled with every size a constant.
  A later call that misses the cache only because some tensor sizes changed (same ranks,
  same 0/1 sizes, same everything else) makes each changed dimension symbolic: it is keyed
  as "2 or more" from then on and traced as a size symbol (`squall.symbolic`), so a decoder's
  growing KV cache or a stream of sequence lengths compiles once more, not at every call.
- True: every dimension of every tensor argument is symbolic from the first call.
- False: none; every new size compiles anew (and speculation may still guard a size).

`torch._dynamo.mark_dynamic(t, d)` on an argument makes that dimension symbolic from the
first call; `mark_static(t, d)` keeps it a constant whatever the policy says. A dimension
whose exact value a compiled program needed (an op that takes only constants read it,
guarded) goes back to being keyed by value, for good (`specialise`).
"""
from __future__ import annotations

from typing import Any

import torch

from ..proxies import real_tensor
from ..frontend.tracing import ALL_DIMS
from ..symbolic import concrete_shape
from .entry_point import argument_leaves, dynamic_key

__all__ = ["DynamicDims", "tensor_paths", "has_shape_guards", "specialised_dims"]

_AUTO = "auto"


def tensor_paths(args: tuple, kwargs: dict) -> dict[tuple, torch.Tensor]:
    """The call's tensor arguments, also in plain lists, tuples and dicts: path -> tensor."""
    return argument_leaves(args, kwargs, lambda x: x if real_tensor(x) else None)


def _marked(t: torch.Tensor, attribute: str) -> set[int]:
    # torch._dynamo.mark_dynamic / mark_static note the dimensions on the tensor itself
    marked = getattr(t, attribute, None)
    return set(marked) if isinstance(marked, (set, frozenset, list, tuple)) else set()


class DynamicDims:
    """The symbolic dimensions of one jitted function's tensor arguments, by path."""

    def __init__(self, mode: bool | str = _AUTO):
        self.mode = mode
        self.dims: dict[tuple, frozenset[int]] = {}  # the entry point reads this very dict
        self._static: dict[tuple, set[int]] = {}
        self._seen: dict[tuple, dict[tuple, tuple]] = {}  # signature -> the shapes of its first call

    def key_for(self, key: tuple, args: tuple, kwargs: dict, numbers: set | frozenset = frozenset()) -> tuple:
        """The key to compile this call under: `key`, or with its symbolic dimensions masked,
        after making symbolic the dimensions in which it differs from an earlier call of the
        same signature (with `numbers`, the dynamic number paths, masked as the key has them)."""
        if self.mode is False:
            return key
        if self.mode is True:
            self.dims[("state",)] = ALL_DIMS  # the tensors argument objects hold too
        tensors = tensor_paths(args, kwargs)
        if not tensors:
            return key
        shapes = {path: tuple(t.shape) for path, t in tensors.items()}
        changed: dict[tuple, set[int]] = {}
        for path, t in tensors.items():
            marked = _marked(t, "_dynamo_dynamic_indices")
            if marked:
                changed.setdefault(path, set()).update(marked)
        if self.mode is True:
            for path, shape in shapes.items():
                changed.setdefault(path, set()).update(range(len(shape)))
        else:
            every = {path: frozenset(range(len(shape))) for path, shape in shapes.items()}
            signature = dynamic_key(key, args, kwargs, numbers, every)
            earlier = self._seen.setdefault(signature, shapes)
            for path, shape in shapes.items():
                before = earlier.get(path)
                if before is not None and len(before) == len(shape):
                    changed.setdefault(path, set()).update(d for d, (a, b) in enumerate(zip(before, shape)) if a != b)
        for path, ds in changed.items():
            ds -= self._static.get(path, set()) | _marked(tensors[path], "_dynamo_static_indices")
            if ds:
                self.dims[path] = self.dims.get(path, frozenset()) | frozenset(ds)
        if not any(path in self.dims for path in tensors):
            return key
        return dynamic_key(key, args, kwargs, set(), self.dims)

    def note_state(self, compilation: Any) -> None:
        """A compiled entry's state check failed (squall.frontend.state_guards): each tensor it read from
        an argument object (a KV cache's keys) whose sizes changed since, same rank and dtype,
        has those dimensions symbolic in the recompile."""
        if self.mode is False:
            return
        for b in compilation.bindings:
            if b.path[0] != "state":
                continue
            owner, k = b.path[1], b.path[2]
            now = owner.get(k)
            traced = concrete_shape(b.proxy.shape)
            if type(now) is not torch.Tensor or now.dim() != len(traced) or now.dtype != b.proxy.dtype:
                continue
            path = ("state", id(owner), k)
            changed = {d for d, (a, n) in enumerate(zip(traced, now.shape)) if a != n} - self._static.get(path, set())
            if changed:
                self.dims[path] = self.dims.get(path, frozenset()) | frozenset(changed)

    def specialise(self, path: tuple, dim: int) -> None:
        """Key dimension `dim` of the argument at `path` by value again, for good."""
        if path[0] == "state":
            path = ("state", id(path[1]), path[2])
        self._static.setdefault(path, set()).add(dim)
        left = self.dims.get(path, frozenset()) - {dim}
        if left:
            self.dims[path] = left
        else:
            self.dims.pop(path, None)


def has_shape_guards(compilation: Any) -> bool:
    """Whether the compilation's generated code checks shape relations (squall.symbolic): a
    failed one runs or compiles another variant, as a failed value guard does."""
    env = getattr(compilation.traced.context, "shapes", None)
    return env is not None and bool(env.check_source())


def specialised_dims(compilation: Any) -> set[tuple[tuple, int]]:
    """(argument path, dimension) of each symbolic input dimension whose exact value the
    program read (an op that takes only constants, `int(size)`): guarded, so correct, but
    it would compile a variant for every size."""
    env = getattr(compilation.traced.context, "shapes", None)
    if env is None or not env.specialised:
        return set()
    paths = {b.proxy.name: b.path for b in compilation.bindings}
    found = set()
    for name, (_, input_name, dim) in env.symbols.items():
        if name in env.specialised:
            found.add((paths[input_name], dim))
            found.update((paths[i], d) for i, d, symbol in env.aliases if symbol == name)
    return found
