"""Tracing replaces nothing on torch.Tensor or builtins, in any thread, during a trace or after it (issue 22)."""
from __future__ import annotations

import builtins
import queue
import threading

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.proxies import TensorProxy

_BUILTIN_ISINSTANCE = builtins.isinstance
_TORCH_ADD = torch._C.TensorBase.add


def _tensor_type() -> dict:
    """What another thread can see of torch.Tensor and builtins: their attributes, and eager results."""
    a, y = torch.tensor([1.0]), torch.randn(3)
    return {
        "builtins": dict(vars(builtins)),
        "Tensor": dict(vars(torch.Tensor)),
        "TensorBase": dict(vars(torch._C.TensorBase)),
        # a 1-element tensor is no sequence: failed once tracing had filled torch.Tensor's sq_item
        "values": (torch.tensor([a, a]).tolist(), torch.tensor([[a]]).shape, (1 - a).tolist(), a[0].item()),
        "calls": (torch.Tensor.cfloat(y).dtype, torch.Tensor.__radd__(y, 1).tolist() == (y + 1).tolist(), torch.is_tensor(y), isinstance(y, torch.Tensor)),
    }


def _assert_same(before: dict, now: dict) -> None:
    for what in ("Tensor", "TensorBase", "builtins"):
        assert before[what].keys() == now[what].keys(), what
        changed = [k for k, v in before[what].items() if now[what][k] is not v and k != "_"]
        assert not changed, f"{what}: {changed}"
    assert before["values"] == now["values"]
    assert before["calls"] == now["calls"]


def test_torch_tensor_and_builtins_are_unchanged_after_compiling():
    before = _tensor_type()
    add = torch.Tensor.add
    program = lambda x: x[0] + add(x, 1) * (2 if isinstance(x, torch.Tensor) and torch.is_tensor(x) else 3)  # noqa: E731
    x = torch.randn(3)
    assert_close(squall.jit(program)(x), program(x))
    _assert_same(before, _tensor_type())
    assert builtins.isinstance is _BUILTIN_ISINSTANCE and torch.Tensor.add is _TORCH_ADD


def test_another_thread_sees_torch_tensor_and_builtins_unchanged_while_a_program_is_traced():
    """A trace blocks in the program's own code; meanwhile this thread inspects torch.Tensor and
    builtins and runs eager code, unbound methods included: all as before."""
    before = _tensor_type()
    entered, release, seen = threading.Event(), threading.Event(), queue.SimpleQueue()

    def program(x):
        seen.put((x, isinstance(x, torch.Tensor), torch.is_tensor(x)))
        entered.set()
        release.wait(60)
        return x * 2 if isinstance(x, torch.Tensor) else x

    jitted, x, results = squall.jit(program), torch.randn(4), queue.SimpleQueue()
    tracer = threading.Thread(target=lambda: results.put(jitted(x)))
    tracer.start()
    try:
        assert entered.wait(60)
        proxy, is_instance, is_tensor = seen.get(timeout=60)
        assert type(proxy) is TensorProxy and is_instance and is_tensor  # being traced now, its checks answered as eager's
        during = _tensor_type()
        assert builtins.isinstance is _BUILTIN_ISINSTANCE
        with pytest.raises(RuntimeError, match="a TensorProxy was used outside of tracing"):
            torch.Tensor.cfloat(proxy)  # torch's own method: this thread traces nothing
        with pytest.raises(TypeError, match="doesn't apply to a 'str' object"):
            torch.Tensor.add("not a tensor", 1)
    finally:
        release.set()
        tracer.join(60)
    _assert_same(before, during)
    _assert_same(before, _tensor_type())
    assert_close(results.get(timeout=1), x * 2)
