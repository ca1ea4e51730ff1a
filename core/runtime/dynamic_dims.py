"""Which tensor dimensions of a jitted function's arguments are symbolic sizes.

The policy (`squall.jit(fn, dynamic=...)`, `$SQUALL_DYNAMIC`, `dynamic` under `[tool.squall]`):

- "auto" (the default): the first call of a signature is compiled with every size a constant.
  A later call that misses the cache because some tensor sizes changed (same ranks, same 0/1
  sizes, same everything else), or whose tensor at some argument path has a size of 2 or more
  that differs from that path's at the last compile, makes each changed dimension symbolic: it
  is keyed as "2 or more" from then on and traced as a size symbol (`squall.symbolic`), so a
  decoder's mask or a stream of sequence lengths compiles once more, not at every call. The
  tensors argument objects hold (a KV cache's) are symbolic from their first compile, and so
  are all tensor arguments of a call given such an object (`holds_state`: a KV cache passed
  to a decoder's forward), so `generate` compiles its prefill and its decoding step once each,
  for every prompt length.
  A tensor whose other sizes changed has its first dimension (the batch) made symbolic in the
  same recompile, where it is 2 or more: in a stream of batches of random lengths and sizes
  the batch size changes too, soon after, and Dynamo's automatic dynamic would converge there
  at the cost of one more compile. Its later dimensions (features, heads) stay constants,
  which is where a symbolic size costs most (guards, or a specialisation and a retrace).
- True: every dimension of every tensor argument is symbolic from the first call.
- False: none; every new size compiles anew (and speculation may still guard a size).

A call with a size of 1 where an entry's key holds a symbolic size is a key of its own (as is
0), but runs that entry's program where its trace never relied on the size being 2 or more and
its guards hold (`admits_ones`; `squall.symbolic.ShapeEnv.ones`): no compile.

`torch._dynamo.mark_dynamic(t, d)` on an argument makes that dimension symbolic from the
first call; `mark_static(t, d)` keeps it a constant whatever the policy says. A dimension
whose exact value a compiled program needed (an op that takes only constants read it,
guarded) goes back to being keyed by value, for good (`specialise`).
"""
from __future__ import annotations

from typing import Any

import torch

from ..proxies import TensorProxy, real_tensor
from ..frontend.state_views import by_structure
from ..frontend.tracing import ALL_DIMS, NUMBER_SIZE, state_dims_path
from ..symbolic import concrete_shape
from ..trace import route_value
from . import dims_profile
from .entry_point import DYNAMIC, argument_leaves, dynamic_key

__all__ = ["DynamicDims", "tensor_paths", "has_shape_guards", "specialised_dims", "holds_state", "held_tensors", "one_long", "zero_one_variant", "one_variants", "admits_ones"]

_AUTO = "auto"


def tensor_paths(args: tuple, kwargs: dict) -> dict[tuple, torch.Tensor]:
    """The call's tensor arguments, also in plain lists, tuples and dicts: path -> tensor."""
    return argument_leaves(args, kwargs, lambda x: x if real_tensor(x) else None)


def _marked(t: torch.Tensor, attribute: str) -> set[int]:
    # torch._dynamo.mark_dynamic / mark_static note the dimensions on the tensor itself
    marked = getattr(t, attribute, None)
    return set(marked) if isinstance(marked, (set, frozenset, list, tuple)) else set()


class DynamicDims:
    """The symbolic dimensions of one jitted function's tensor arguments, by path.

    `batch_with_length=False` makes only the dimensions that changed symbolic, one at a time;
    `zero_one_eagerly=False` compiles a 0/1 variant of a symbolic entry at its first call
    instead of running it eagerly until it paid for that compile (squall.runtime.ski_rental)
    (bench/length_stream.py compares these on a stream of lengths and batch sizes)."""

    def __init__(self, mode: bool | str = _AUTO, batch_with_length: bool = True, zero_one_eagerly: bool = True, code: Any = None):
        self.mode = mode
        self.batch_with_length = batch_with_length
        self.zero_one_eagerly = zero_one_eagerly
        self.dims: dict[tuple, frozenset[int]] = {}  # the entry point reads this very dict
        self._static: dict[tuple, set[int]] = {}
        self._seen: dict[tuple, dict[tuple, tuple]] = {}  # signature -> the shapes of its first call
        self._last: dict[tuple, tuple] = {}  # path -> its shape at the last compile
        # the function's calls come in shapes that vary (squall.runtime.ski_rental: a new 0/1 variant
        # waits): the user said so (dynamic=True), or a dimension became symbolic because it changed
        # between calls (the "auto" policy did it)
        self.sizes_vary = mode is True
        # the program's code object, where what it learns is kept for later jits of it
        # (squall.runtime.dims_profile, $SQUALL_REMEMBER_DYNAMIC): those start with it symbolic
        self.code = code if mode == _AUTO else None
        # the dimensions this jit started with symbolic because earlier jits of its code learned them (`squall explain` says so)
        self.remembered: dict[tuple, frozenset[int]] = dims_profile.learned(self.code) if self.code is not None else {}
        if self.remembered:
            self.dims.update(self.remembered)
            self.sizes_vary = True

    def key_for(self, key: tuple, args: tuple, kwargs: dict, numbers: set | frozenset = frozenset()) -> tuple:
        """The key to compile this call under: `key`, or with its symbolic dimensions masked,
        after making symbolic the dimensions in which it differs from an earlier call of the
        same signature (with `numbers`, the dynamic number paths, masked as the key has them)."""
        if self.mode is False:
            return key
        # the tensors argument objects hold (a KV cache's keys, replaced at every step): every
        # size of 2 or more symbolic from the first compile, in either mode (`specialise` keys one
        # by value again), so a decoding loop compiles its step once, not again when the cache grows
        self.dims[("state",)] = ALL_DIMS
        tensors = tensor_paths(args, kwargs)
        sized_numbers = any(v is NUMBER_SIZE and p[0] != "state" for p, v in self.dims.items())
        if not tensors:
            return dynamic_key(key, args, kwargs, set(), self.dims) if sized_numbers else key
        shapes = {path: tuple(t.shape) for path, t in tensors.items()}
        changed: dict[tuple, set[int]] = {}
        varied: dict[tuple, set[int]] = {}  # of those, the dimensions that changed between calls
        for path, t in tensors.items():
            marked = _marked(t, "_dynamo_dynamic_indices")
            if marked:
                changed.setdefault(path, set()).update(marked)
        # a call given a state-holding object (a KV cache, keyed by its layout) is a step of a
        # stateful loop, generation: its tensors' lengths change from call to call by design, so
        # they are symbolic from the first compile (a new prompt length compiles nothing)
        if self.mode is True or any(holds_state(a) for a in (*args, *kwargs.values())):
            for path, shape in shapes.items():
                changed.setdefault(path, set()).update(range(len(shape)))
        else:
            every = {path: frozenset(range(len(shape))) for path, shape in shapes.items()}
            signature = dynamic_key(key, args, kwargs, numbers, every)
            earlier = self._seen.setdefault(signature, shapes)
            for path, shape in shapes.items():
                before = earlier.get(path)
                if before is not None and len(before) == len(shape):
                    moved = {d for d, (a, b) in enumerate(zip(before, shape)) if a != b}
                    if moved and self.batch_with_length and shape[0] >= 2:
                        moved.add(0)  # its batch size with it: see the module's note
                    changed.setdefault(path, set()).update(moved)
                    varied.setdefault(path, set()).update(moved)
                # as Dynamo does per source: a size that differs from the last compile's at this
                # path, whatever else differs (a decoder's mask from the prompt to the first step)
                last = self._last.get(path)
                if last is not None and len(last) == len(shape):
                    differ = {d for d, (a, b) in enumerate(zip(last, shape)) if a != b and b >= 2}
                    changed.setdefault(path, set()).update(differ)
                    varied.setdefault(path, set()).update(differ)
            self._last.update(shapes)
        for path, ds in changed.items():
            ds -= self._static.get(path, set()) | _marked(tensors[path], "_dynamo_static_indices")
            if ds:
                self.dims[path] = self.dims.get(path, frozenset()) | frozenset(ds)
                self.sizes_vary = self.sizes_vary or bool(ds & varied.get(path, set()))
                if self.code is not None and ds & varied.get(path, set()):
                    dims_profile.learn(self.code, path, self.dims[path])
        if not sized_numbers and not any(path in self.dims for path in tensors):
            return key
        return dynamic_key(key, args, kwargs, set(), self.dims)

    def note_state(self, compilation: Any, args: tuple, kwargs: dict) -> None:
        """A compiled entry's state check failed (squall.frontend.state_guards): each tensor it read from
        an argument object (a KV cache's keys) whose sizes in this call (`args`, `kwargs`) differ
        from the traced ones, same rank and dtype, has those dimensions symbolic in the recompile."""
        if self.mode is False:
            return
        self._note_routed_ints(compilation, args, kwargs)
        for b in compilation.bindings:
            if b.path[0] != "state" or type(b.proxy) is not TensorProxy:
                continue
            _, owner, k, route = b.path
            try:
                now = route_value(route, args, kwargs) if route is not None else owner.get(k)
            except (KeyError, IndexError, AttributeError, TypeError):
                continue  # this call's object has another layout: nothing to compare
            traced = concrete_shape(b.proxy.shape)
            if type(now) is not torch.Tensor or now.dim() != len(traced) or now.dtype != b.proxy.dtype:
                continue
            path = state_dims_path(owner, k, route)
            changed = {d for d, (a, n) in enumerate(zip(traced, now.shape)) if a != n} - self._static.get(path, set())
            if changed:
                self.dims[path] = self.dims.get(path, frozenset()) | frozenset(changed)

    def _note_routed_ints(self, compilation: Any, args: tuple, kwargs: dict) -> None:
        """Each int the compiled entry read from an argument object (`routed_ints`: a sliding-window
        KV cache's count of tokens seen) that differs in this call, and is 2 or more, is a size
        symbol in the recompile (`NUMBER_SIZE`), as a changed tensor size is."""
        state = getattr(compilation.traced.context, "state", None)
        for (route, name), traced in getattr(state, "routed_ints", {}).items():
            try:
                now = route_value(route, args, kwargs).__dict__.get(name)
            except (KeyError, IndexError, AttributeError, TypeError):
                continue  # this call's object has another layout: nothing to compare
            path = state_dims_path(None, name, (*route, ("attr", name)))  # (as tracing's `state_size` keys it)
            if type(now) is int and now != traced and now >= 2 and None not in self._static.get(path, set()):
                self.dims[path] = NUMBER_SIZE

    def number_size(self, path: tuple) -> bool:
        """Make the int argument at `path` (a dynamic number whose value the trace read as a size:
        a slice bound, `arange(n)`, a narrow's length) a size symbol from the next compile on
        (`NUMBER_SIZE`), unless it was keyed by value as a size already; whether it did."""
        if self.mode is False or None in self._static.get(path, set()):
            return False
        self.dims[path] = NUMBER_SIZE
        return True

    def specialise(self, path: tuple, dim: int | None) -> None:
        """Key dimension `dim` of the argument at `path` by value again, for good (dim None: the
        int an argument object holds there)."""
        state = path[0] == "state"
        if state:
            path = state_dims_path(*path[1:])
        self._static.setdefault(path, set()).add(dim)
        if self.code is not None:
            dims_profile.unlearn(self.code, path, dim)
        left = self.dims.get(path, self.dims.get(("state",), frozenset()) if state else frozenset()) - {dim}
        if left or state:  # (a state tensor's own empty set: none of its dimensions, not every one)
            self.dims[path] = left
        else:
            self.dims.pop(path, None)


def zero_one_variant(key: Any, others: Any) -> bool:
    """Whether `key` is a 0/1 variant of one of the keys `others`: the same but for a size of 0
    or 1 where that key holds DYNAMIC (a batch of 1 beside an entry with a symbolic batch)."""
    return any(_match(key, other, (0, 1)) is True for other in others)


def one_variants(key: Any, others: Any) -> list:
    """The keys among `others` of which `key` is a variant of size 1: the same but for a size of
    1 where that key holds DYNAMIC (never 0: an empty tensor is always keyed apart)."""
    return [other for other in others if _match(key, other, (1,)) is True]


def _match(a: Any, b: Any, small: tuple[int, ...], in_shape: bool = False) -> bool | None:
    """None where `a` differs from `b` otherwise than by a size in `small` in place of DYNAMIC in
    a shape (not a dynamic number's (type, DYNAMIC)); else whether it differs so somewhere."""
    if b is DYNAMIC:
        return a is not DYNAMIC and (True if in_shape and type(a) is int and a in small else None)
    if isinstance(a, tuple) and isinstance(b, tuple):  # torch.Size too
        if len(a) != len(b):
            return None
        shape = all(type(y) is int or y is DYNAMIC for y in b)
        found = False
        for x, y in zip(a, b):
            matched = _match(x, y, small, shape)
            if matched is None:
                return None
            found = found or matched
        return found
    return False if type(a) is type(b) and a == b else None


def admits_ones(compilation: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the symbolic program of `compilation` serves this call, whose tensor arguments
    have a size of 1 where it has a size symbol: each such symbol is one the trace never relied
    on being 2 or more (`ShapeEnv.ones`), and every shape guard holds at this call's sizes. (The
    rest of its guards, `GuardSet.holds`, is the caller's to check.) False where a symbol is read
    from anything but a tensor argument (a KV cache's, an int an object holds)."""
    env = getattr(compilation.traced.context, "shapes", None)
    if env is None or not env.ones:
        return False
    tensors = tensor_paths(args, kwargs)
    by_name = {b.proxy.name: tensors.get(b.path) for b in compilation.bindings if type(b.proxy) is TensorProxy}
    values: dict[str, int] = {}
    for name, (_, input_name, dim) in env.symbols.items():
        t = by_name.get(input_name)
        if t is None or dim is None or dim >= t.dim():
            return False
        n = t.shape[dim]
        if n < 1 or (n == 1 and name not in env.ones):
            return False
        values[name] = n
    check = env.check_source()
    try:
        return not check or bool(eval(check, {"__builtins__": {}}, {**by_name, **values}))  # noqa: S307 - squall's own guard source
    except Exception:  # noqa: BLE001 - a guard over what this call does not hold (a parameter): not served
        return False


def holds_state(obj: Any, depth: int = 2) -> bool:
    """Whether `obj` is an argument object that holds state a loop carries from call to call (a
    KV cache): a plain object (`by_structure`) with a tensor among its attributes, or a list or
    tuple of tensors or of such objects (a cache's layers, empty before the first step), or
    such an object (an encoder-decoder's cache: one for its self-attention, one for its
    cross-attention), `depth` objects down."""
    if not by_structure(obj):
        return False
    for value in getattr(obj, "__dict__", {}).values():
        if isinstance(value, torch.Tensor):
            return True
        if type(value) in (list, tuple) and value and all(isinstance(v, torch.Tensor) or by_structure(v) for v in value):
            return True
        if depth > 0 and holds_state(value, depth - 1):
            return True
    return False


def held_tensors(obj: Any, depth: int = 3) -> list[torch.Tensor]:
    """The tensors a state-holding argument object holds (`holds_state`), `depth` objects down:
    its tensor attributes, and those of the lists, tuples and objects it holds."""
    found: list[torch.Tensor] = []
    values = list(getattr(obj, "__dict__", {}).values()) if by_structure(obj) else []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif depth > 0 and type(value) in (list, tuple):
            for v in value:
                found.extend([v] if isinstance(v, torch.Tensor) else held_tensors(v, depth - 1))
        elif depth > 0:
            found.extend(held_tensors(value, depth - 1))
    return found


def one_long(obj: Any) -> bool:
    """Whether state-holding `obj` holds a tensor one long where another of its tensors of the
    same kind is longer: the same rank, dtype and sizes but in one dimension, where it has 1
    and the other 2 or more (an encoder-decoder's cache after its first step: its
    self-attention keys one token long beside its cross-attention keys a prompt long). That
    dimension is a length that grows from call to call: at the next step it is 2, a
    signature of its own (sizes 1 stay constants), so this one comes once per loop."""
    shapes: dict[tuple, list[tuple[int, ...]]] = {}
    for t in held_tensors(obj):
        shapes.setdefault((t.dim(), t.dtype), []).append(tuple(t.shape))
    for kind in shapes.values():
        distinct = set(kind)
        for a in distinct:
            for b in distinct:
                differ = [d for d, (x, y) in enumerate(zip(a, b)) if x != y]
                if len(differ) == 1 and a[differ[0]] == 1 and b[differ[0]] >= 2:
                    return True
    return False


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
