"""squall under torch.distributed: DDP, FSDP2 and collectives, on 2 CPU processes over gloo.

One spawn runs every scenario (starting processes is the expensive part); each rank writes
what happened per scenario, and a test per scenario reads it. A scenario compares squall with
eager under the same wrapper: losses per step and parameters after the optimizer steps.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import socket
import time
import traceback
import warnings

import pytest
import torch

import squall

dist = torch.distributed
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available in this PyTorch build", allow_module_level=True)

import torch.distributed._functional_collectives as funcol  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from squall.ltorch.collectives import NOT_HANDED_TO_TRACING, hands_calls_to_tracing  # noqa: E402
from squall.proxies import TensorProxy  # noqa: E402
from squall.runtime.wrappers import UnsupportedWrapping  # noqa: E402

WORLD_SIZE = 2
STEPS = 3


def _block() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8), torch.nn.LayerNorm(8))


def _model() -> torch.nn.Sequential:
    torch.manual_seed(0)  # the same initial parameters for squall and eager, on every rank
    return torch.nn.Sequential(_block(), _block(), torch.nn.Linear(8, 4))


def _train(model: torch.nn.Module, rank: int) -> tuple[list[float], list[torch.Tensor]]:
    """Losses of a few AdamW steps on this rank's own data, and the parameters after them."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own batch, as data parallelism has
    losses = []
    for _ in range(STEPS):
        x, y = torch.randn(6, 8, generator=data), torch.randn(6, 4, generator=data)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.full_tensor() if hasattr(p, "full_tensor") else p.detach().clone() for p in model.parameters()]


def _same_training(eager: torch.nn.Module, compiled: torch.nn.Module, rank: int) -> None:
    eager_losses, eager_params = _train(eager, rank)
    losses, params = _train(compiled, rank)
    torch.testing.assert_close(losses, eager_losses)
    torch.testing.assert_close(params, eager_params)
    # the ranks agree: gradients were reduced across them
    gathered = [torch.empty_like(params[0]) for _ in range(WORLD_SIZE)]
    dist.all_gather(gathered, params[0])
    torch.testing.assert_close(gathered[0], gathered[1])


def scenario_ddp(rank: int) -> None:
    _same_training(DDP(_model()), DDP(squall.jit(_model())), rank)


def _fsdp(compile_block) -> torch.nn.Module:
    model = _model()
    for i in range(2):
        model[i] = compile_block(model[i])
    fully_shard(model)
    return model


def scenario_fsdp_jit_then_shard(rank: int) -> None:
    def shard(block):
        fully_shard(block)
        return block

    _same_training(_fsdp(shard), _fsdp(lambda block: fully_shard(squall.jit(block))), rank)


def scenario_fsdp_shard_then_jit(rank: int) -> None:
    _same_training(_fsdp(fully_shard), _fsdp(lambda block: squall.jit(fully_shard(block))), rank)


def scenario_fsdp_whole_model(rank: int) -> None:
    # one FSDP2 unit, compiled whole: its hooks run eagerly around the compiled forward
    eager = _model()
    fully_shard(eager)
    _same_training(eager, squall.jit(fully_shard(_model())), rank)


# PyTorch 2.10 names these all_gather_tensor/reduce_scatter_tensor (funcol) and
# all_gather_into_tensor/reduce_scatter_tensor (c10d); later releases deprecate those names
_all_gather = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor
_reduce_scatter = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor
_c10d_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_c10d_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
# PyTorch 2.10's c10d.broadcast does not hand its call to tracing: squall refuses it there (scenario_errors)
_TRACES_C10D_BROADCAST = "broadcast" not in NOT_HANDED_TO_TRACING
# eager differentiates the functional collectives only where PyTorch registers their autograd
# (not 2.10): squall's gradients are compared with eager's there
_EAGER_DIFFERENTIATES_COLLECTIVES = torch._C._dispatch_has_kernel_for_dispatch_key("_c10d_functional::all_reduce", "Autograd")


def _communicating(x, w):
    y = funcol.all_reduce(x * w, "sum", dist.group.WORLD)
    gathered = _all_gather(y.sin(), 0, dist.group.WORLD)
    scattered = _reduce_scatter(gathered * 3, "sum", 0, dist.group.WORLD)
    z = x.clone()
    dist.all_reduce(z, op=dist.ReduceOp.MAX)
    out = torch.empty(2 * x.shape[0], *x.shape[1:])
    _c10d_all_gather(out, z)
    part = torch.empty(x.shape[0] // 2, *x.shape[1:])
    _c10d_reduce_scatter(part, x * 2)
    from_one = funcol.broadcast(x + 1, 1, dist.group.WORLD)
    from_zero = x - 1
    if _TRACES_C10D_BROADCAST:
        dist.broadcast(from_zero, src=0)
    unread = funcol.all_reduce(x, "max", dist.group.WORLD)  # returned without a read: waited at the end
    return (scattered * w).sum(), z, out, part, from_one, from_zero, unread


def scenario_collectives(rank: int) -> None:
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(rank))
    w = torch.randn(4, 3, generator=torch.Generator().manual_seed(10 + rank), requires_grad=_EAGER_DIFFERENTIATES_COLLECTIVES)
    expected = _communicating(x, w)
    expected_grad = torch.autograd.grad(expected[0], w) if w.requires_grad else None
    compiled = squall.jit(_communicating)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no opaque call, no autograd fallback
        for _ in range(2):  # the compiling call and a cached one
            got = compiled(x, w)
            torch.testing.assert_close(got, expected)
            if w.requires_grad:
                torch.testing.assert_close(torch.autograd.grad(got[0], w), expected_grad)
    traces = squall.last_traces(compiled)
    bsyms = traces.traced.bsyms
    for op in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast"):
        collectives = [b for b in bsyms if b.sym.id == f"torch.ops._c10d_functional.{op}"]
        assert collectives, op
        for collective in collectives:
            # the first operation that reads a collective's result is its wait (PyTorch 2.10 reads
            # its strides first, wrapping it: metadata, not data)
            readers = [b for b in bsyms if any(a is collective.output for a in b.args) and isinstance(b.output, TensorProxy)]
            assert readers[0].sym.id == "torch.ops._c10d_functional.wait_tensor", (op, readers[0].sym.id)
    if w.requires_grad:
        backward_ops = {b.sym.id for b in traces.backward.bsyms}
        assert "torch.ops._c10d_functional.all_reduce" in backward_ops  # the gradient is communicated too


def _expect(error: type, match: str, fn, *args) -> None:
    with pytest.raises(error, match=match):
        fn(*args)


def scenario_errors(rank: int) -> None:
    x = torch.randn(3, 2)
    group = dist.group.WORLD.group_name
    odd = squall.jit(lambda x: torch.ops._c10d_functional.reduce_scatter_tensor(x, "sum", 2, group))
    _expect(ValueError, "must be divisible by the group size 2", odd, x)
    bad_op = squall.jit(lambda x: funcol.all_reduce(x, "mean", dist.group.WORLD))
    _expect(ValueError, "reduce_op must be one of", bad_op, x)

    def asynchronous(x):
        dist.all_reduce(x, async_op=True)
        return x

    _expect(NotImplementedError, r"async_op=True", squall.jit(asynchronous), x.clone())

    def differentiated_in_place(w):
        y = w * 2
        dist.all_reduce(y)
        return y

    def reducing(x):
        dist.reduce(x, dst=0)
        return x

    # a collective squall does not trace is refused, not run on the meta device (which communicates
    # nothing); where PyTorch does not hand it to tracing (2.10), squall says that instead
    _expect(NotImplementedError, "torch.distributed.reduce is not traced", squall.jit(reducing), x.clone())
    if not _TRACES_C10D_BROADCAST:

        def broadcasting(x):
            dist.broadcast(x, src=0)
            return x

        _expect(NotImplementedError, re.escape(f"broadcast is not traced on PyTorch {torch.__version__}"), squall.jit(broadcasting), x.clone())

    # eager passes the gradient through c10d's in-place all_reduce unchanged; squall reduces it: said
    with pytest.warns(squall.SquallWarning, match="eager PyTorch passes the gradient"):
        squall.jit(differentiated_in_place)(torch.ones(3, requires_grad=True))
    # tracing through a wrapper that communicates: refused, saying which order works
    _expect(UnsupportedWrapping, r"DDP\(squall.jit\(model\)\)", squall.jit, DDP(_model()))
    model = _model()
    compiled = squall.jit(model)
    fully_shard(model[0])  # sharded after jit: seen when the compiled module is called
    _expect(UnsupportedWrapping, "compile each sharded block", compiled, x.new_zeros(2, 8))
    model = _model()
    fully_shard(model)
    # a block whose parameters are shards, with no FSDP hooks of its own to unshard them
    _expect(UnsupportedWrapping, "sharded DTensor", squall.jit(model[0]), x.new_zeros(2, 8))


SCENARIOS = {name.removeprefix("scenario_"): fn for name, fn in globals().items() if name.startswith("scenario_")}


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)  # two processes share the machine's cores
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # a scenario that hangs on one rank fails on the other after this long, rather than never
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=60))
    results = {}
    try:
        for name, scenario in SCENARIOS.items():
            try:
                start = time.perf_counter()
                scenario(rank)
                results[name] = "ok"
                results[f"{name} seconds"] = time.perf_counter() - start
            except Exception:  # noqa: BLE001 - reported by the test of that scenario
                results[name] = traceback.format_exc()
            dist.barrier()
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict[str, str]]:
    out_dir = str(tmp_path_factory.mktemp("distributed"))
    torch.multiprocessing.spawn(_worker, args=(_free_port(), out_dir), nprocs=WORLD_SIZE)
    found = []
    for rank in range(WORLD_SIZE):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            found.append(json.load(f))
    return found


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_distributed(results, scenario):
    for rank, per_rank in enumerate(results):
        assert per_rank.get(scenario) == "ok", f"rank {rank}, scenario {scenario}:\n{per_rank.get(scenario)}"


def test_which_c10d_functions_hand_calls_to_tracing():
    assert hands_calls_to_tracing(dist.all_reduce)  # on every torch squall declares (2.10 on)

    def communicates_without_handing_over(tensor, group=None):
        return tensor

    assert not hands_calls_to_tracing(communicates_without_handing_over)
    assert "all_reduce" not in NOT_HANDED_TO_TRACING
    assert NOT_HANDED_TO_TRACING <= {"broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "all_to_all",
                                     "all_to_all_single", "send", "recv", "isend", "irecv", "all_reduce_coalesced",
                                     "all_gather_coalesced"}  # fmt: skip
