"""Where inductor would give an op's outputs other dtypes than eager's kernel does.

inductor traces a region on fake tensors, so each op's outputs get the dtypes of torch's meta
function (and its decomposition, which inductor lowers, agrees with it). For a few ops these are
not eager's. On CPU, batch norm (`_native_batch_norm_legit_functional` and its siblings) and
group norm of a bfloat16 or float16 input with float32 weights return their saved mean and
inverse standard deviation in the input's dtype (torch/_decomp/decompositions.py casts them:
`if input.device.type == "cpu": save_mean = save_mean.to(dtype=input.dtype)`), where eager's
mixed-type CPU kernels return float32, which is what squall's trace records. Compiled into a
region, such an output comes back in the other dtype while every consumer was planned, and
compiled, for the trace's: timm's ResNet training step under CPU bfloat16 autocast handed the
bfloat16 statistics to a backward region compiled for float32, which read each 2-byte buffer as
4-byte floats, past its end, and returned NaNs and infinities for the first convolution's weight
gradient (2026-11-27). `dtypes_differ` finds such ops before a region holds them: it runs the op on
fake tensors, where its inputs and outputs mix floating dtypes (mixed-type kernels are where the
rules part).
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils._pytree import tree_flatten, tree_map

from squall.extend import BoundSymbol, SymInt, TensorProxy, concrete_shape

__all__ = ["dtypes_differ"]

# (op, its arguments' metadata) -> the answer; planning asks for every op of every plan
_ANSWERS: dict[tuple, str] = {}
_CACHE_LIMIT = 4096


def _key(sym_id: str, args: tuple, kwargs: dict) -> tuple | None:
    leaves, spec = tree_flatten((args, kwargs))
    parts = []
    for x in leaves:
        if isinstance(x, TensorProxy):
            parts.append((tuple(concrete_shape(x.shape)), x.dtype, x.device.type))
        elif x is None or isinstance(x, (bool, int, float, str, torch.dtype, torch.device, torch.memory_format)) and type(x) is not SymInt:
            parts.append((type(x).__name__, x))
        else:
            return None  # a value whose effect on dtypes is not worth keying (asked each time)
    return (sym_id, str(spec), tuple(parts))


def dtypes_differ(bsym: BoundSymbol, callee) -> str:
    """Why inductor's tracing of `callee` (the torch callable the region runs for `bsym`) gives an
    output another dtype than the trace's ("" where it does not, or where the op cannot be run on
    fake tensors: a region that cannot be traced fails to compile and says so there)."""
    outputs = bsym.output_proxies()
    floats = {p.dtype for p in (*bsym.input_proxies(), *outputs) if p.dtype.is_floating_point}
    if len(floats) < 2 or len(outputs) < 2:
        # one floating dtype throughout: the rules agree. One output (a softmax upcast to float32 in
        # every bfloat16 transformers model's attention): its dtype is the one the call asks for; the
        # statistics norms save beside their output are where the rules part. A fake run's first
        # use imports Dynamo, 2.5-8 s of CPU in the user's process beside its calls, which an
        # upgrade otherwise never pays; a region compiled wrong all the same is declined when it
        # compiles (executor._unlike_trace)
        return ""
    args, kwargs = bsym.shortest_arguments()
    key = _key(bsym.sym.id, args, kwargs)
    if key is not None and key in _ANSWERS:
        return _ANSWERS[key]
    answer = _ask(bsym, callee, args, kwargs)
    if key is not None and len(_ANSWERS) < _CACHE_LIMIT:
        _ANSWERS[key] = answer
    return answer


def _ask(bsym: BoundSymbol, callee, args: tuple, kwargs: dict) -> str:
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=False)

    def fake(x):
        if not isinstance(x, TensorProxy):
            return x.value if type(x) is SymInt else x
        return torch.empty(concrete_shape(x.shape), dtype=x.dtype, device=x.device)

    try:
        with mode, warnings_off():
            out = callee(*tree_map(fake, args), **tree_map(fake, kwargs))
    except Exception:  # noqa: BLE001 - see the docstring
        return ""
    got = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    want = bsym.output_proxies()
    if len(got) != len(want):
        return ""
    for k, (t, p) in enumerate(zip(got, want)):
        if t.dtype != p.dtype:
            return (f"inductor traces its output {k} as {t.dtype} where eager's kernel returns {p.dtype} "
                    "(torch's meta function and decomposition disagree with eager here; see squall_inductor.meta_dtypes)")
    return ""


@contextlib.contextmanager
def warnings_off():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
