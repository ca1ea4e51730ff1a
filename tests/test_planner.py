"""The planner: ranks, checkers, decomposition, faults, and fusion regions."""
from __future__ import annotations

import random
import threading
from types import SimpleNamespace

import torch

import squall
from squall.extend import Availability, Declined, FusionExecutor, OperatorExecutor
from squall.market.fusion import form_regions
from squall.market.torch_executor import PRIM_IMPLS, make_executor
from squall.proxies import TensorProxy
from opinfos import prims_only_executor




def _decisions(fn, op: str) -> list:
    return [d for d in squall.last_traces(fn).plan.decisions if d.bsym.sym.id == op]


def test_checker_takes_exactly_the_calls_it_accepts():
    ex = OperatorExecutor("f32_2d")
    seen = []

    def checker(a):
        return isinstance(a, TensorProxy) and a.dtype == torch.float32 and a.ndim == 2

    def impl(a):
        seen.append((a.dtype, a.ndim))
        return torch.exp(a)

    ex.register_implementation("torch.exp", impl, checker=checker)

    def program(a, b, c):
        return torch.exp(a), torch.exp(b), torch.exp(c)

    fn = squall.jit(program, executors=[ex, make_executor()])
    a, b, c = torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64), torch.randn(4)
    for got, x in zip(fn(a, b, c), (a, b, c)):
        torch.testing.assert_close(got, torch.exp(x))
    assert seen == [(torch.float32, 2)]
    assert [d.executor for d in _decisions(fn, "torch.exp")] == ["f32_2d", "torch", "torch"]
    assert _decisions(fn, "torch.exp")[1].declined == [("f32_2d", "checker declined")]


def test_prims_are_taken_from_inside_decomposed_ops():
    mine = OperatorExecutor("exp_kernels")
    ran = []
    mine.register_implementation("prims.exp", lambda a: ran.append(a.shape) or torch.exp(a))
    fn = squall.jit(lambda x: torch.softmax(x, -1), executors=[mine, prims_only_executor()])
    x = torch.randn(3, 5)
    torch.testing.assert_close(fn(x), torch.softmax(x, -1))
    assert ran == [torch.Size([3, 5])]
    (top,) = _decisions(fn, "torch.softmax")
    assert top.decomposed and top.declined == [("exp_kernels", "not implemented"), ("torch_prims", "not implemented")]
    (exp,) = _decisions(fn, "prims.exp")
    assert exp.executor == "exp_kernels" and exp.depth >= 1


def test_checker_that_raises_is_declined_and_reported():
    ex = OperatorExecutor("flaky")
    ex.register_implementation("torch.exp", torch.exp, checker=lambda a: 1 / 0)
    fn = squall.jit(torch.exp, executors=[ex, make_executor()])
    x = torch.randn(3)
    torch.testing.assert_close(fn(x), torch.exp(x))
    (d,) = _decisions(fn, "torch.exp")
    assert d.executor == "torch"
    assert d.declined == [("flaky", "checker raised ZeroDivisionError: division by zero")]
    assert squall.last_traces(fn).plan.errors == ["flaky's checker for torch.exp raised: ZeroDivisionError: division by zero"]


def test_unavailable_executor_is_passed_over_with_its_reason():
    class NeedsGPU(OperatorExecutor):
        def is_available(self) -> Availability:
            return Availability(False, "no CUDA device")

    ex = NeedsGPU("gpu_only")
    ex.register_implementation("torch.exp", torch.exp)
    fn = squall.jit(lambda x: torch.exp(x).sin(), executors=[ex, make_executor()])
    x = torch.randn(3)
    torch.testing.assert_close(fn(x), torch.exp(x).sin())
    plan = squall.last_traces(fn).plan
    assert plan.unavailable == {"gpu_only": "no CUDA device"}
    assert _decisions(fn, "torch.exp")[0].declined == [("gpu_only", "unavailable: no CUDA device")]
    assert _decisions(fn, "torch.sin")[0].declined == [("gpu_only", "not implemented")]


# --- fusion -------------------------------------------------------------------------------------

FUSIBLE = ("prims.exp", "prims.add", "prims.mul", "prims.convert_element_type", "prims.broadcast_in_dim")


class PyFuser(FusionExecutor):
    """A real fusion executor: each region becomes one generated Python function of torch calls."""

    compiles_in_background = False  # generating a Python function is instant: no background tier

    def __init__(self, name: str = "pyfuse", min_region_size: int = 1):
        super().__init__(name, default_rank=50)
        self.min_region_size = min_region_size
        self.compiled_sources: list[str] = []
        for op in FUSIBLE:
            self.register_supported(op)

    def compile_region(self, region):
        names = {p.name: f"i{k}" for k, p in enumerate(region.inputs)}
        env = {"impls": PRIM_IMPLS}
        lines = [f"def region({', '.join(names.values())}):"]
        for n, call in enumerate(region.calls):
            args = []
            for a in call.args:
                if isinstance(a, TensorProxy):
                    args.append(names[a.name])
                else:
                    env[f"k{n}_{len(args)}"] = a
                    args.append(f"k{n}_{len(args)}")
            out = f"v{n}"
            names[call.output.name] = out
            lines.append(f"    {out} = impls[{call.sym.id!r}]({', '.join(args)})")
        lines.append(f"    return ({''.join(names[p.name] + ', ' for p in region.outputs)})")
        source = "\n".join(lines)
        self.compiled_sources.append(source)
        exec(source, env)
        return env["region"]


def test_fusion_regions_merge_along_data_flow_and_compile_once():
    fuser = PyFuser()

    def program(x):
        a = torch.exp(x) * 2.0  # region 0
        s = torch.sin(a)  # not fusible: cuts the data flow
        b = torch.exp(s) * 2.0  # cannot join region 0 (it would need sin, which needs region 0)
        return b + 1.0, a

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(8)
    got = fn(x)
    torch.testing.assert_close(got[1], torch.exp(x) * 2.0)
    torch.testing.assert_close(got[0], torch.exp(torch.sin(torch.exp(x) * 2.0)) * 2.0 + 1.0)
    plan = squall.last_traces(fn).plan
    assert len(plan.regions) == 2
    assert plan.regions[0].ops == ["torch.exp", "torch.mul"]
    assert plan.regions[1].ops == ["torch.exp", "torch.mul", "torch.add"]
    assert [d.executor for d in _decisions(fn, "torch.sin")] == ["torch"]
    executed = squall.last_traces(fn).source
    assert executed.count("pyfuse_region") == 2 and "torch_sin" in executed
    # the two regions differ (the second adds 1.0): two compilations
    assert len(fuser.compiled_sources) == 2


def test_a_dropout_in_eval_mode_splits_no_region():
    fuser = PyFuser()

    def program(x):
        a = torch.exp(x) * 2.0
        a = torch.nn.functional.dropout(a, p=0.5, training=False)  # returns its input, unclaimed
        return (a + 1.0) * 2.0

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(8)
    torch.testing.assert_close(fn(x), program(x))
    plan = squall.last_traces(fn).plan
    assert [r.ops for r in plan.regions] == [["torch.exp", "torch.mul", "torch.add", "torch.mul"]]


def test_regions_joined_across_unfused_calls_form_no_cycle():
    # e joins d's region (no data flow between them); h may then not join a's region, which
    # reaches it through sin(a) -> d's region -> sin(e): joined, the two regions formed a cycle
    fuser = PyFuser()

    def program(x, y):
        a = torch.exp(x)
        d = torch.exp(torch.sin(a))
        e = torch.exp(y)
        h = torch.exp(torch.sin(e))
        return d, h

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(fn(x, y), program(x, y))
    plan = squall.last_traces(fn).plan
    assert not plan.errors
    assert [r.ops for r in plan.regions] == [["torch.exp"], ["torch.exp", "torch.exp"], ["torch.exp"]]


def test_a_region_holds_the_calls_of_one_device():
    # independent calls on two devices would join one region (no data flow between them); a
    # region is compiled for one device, so each device's calls form their own
    fuser = PyFuser()

    def program(x, y):
        return torch.exp(x) * 2.0, torch.exp(y) * 2.0, (torch.exp(x) + 1.0).to("meta")

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x, y = torch.randn(4), torch.randn(4, device="meta")
    got, want = fn(x, y), program(x, y)
    torch.testing.assert_close(got[0], want[0])
    assert [(t.device, t.shape) for t in got[1:]] == [(t.device, t.shape) for t in want[1:]]
    plan = squall.last_traces(fn).plan
    assert sorted(r.inputs for r in plan.regions) == [["x"], ["y"]]  # one region of x's (cpu), one of y's (meta)
    # the move itself is no fusible op: it runs on torch, between the regions
    assert [d.executor for d in _decisions(fn, "torch.Tensor.to")] == ["torch"]


def test_region_formation_never_forms_a_cycle_on_random_programs():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(2, 30)
        calls = []
        for i in range(n):
            inputs = [SimpleNamespace(name=f"v{j}") for j in rng.sample(range(i), k=min(i, rng.randint(0, 3)))]
            calls.append(SimpleNamespace(
                input_proxies=lambda inputs=inputs: inputs,
                output_proxies=lambda i=i: [SimpleNamespace(name=f"v{i}")],
                sym=SimpleNamespace(tags=frozenset()),
                claimed=rng.random() < 0.7,
            ))
        groups, order = form_regions(calls, lambda b: b.claimed)  # asserts when the units form a cycle
        position = {i: k for k, unit in enumerate(order) for i in unit}
        for i, b in enumerate(calls):  # every call's producers run in an earlier unit, or its own
            for p in b.input_proxies():
                j = int(p.name[1:])
                assert position[j] < position[i] or position[j] == position[i]


def test_identical_regions_compile_once():
    fuser = PyFuser()

    def program(x):
        a = torch.exp(x) * 2.0
        b = torch.exp(torch.sin(a)) * 2.0
        return torch.sin(b)

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(4, 4)
    torch.testing.assert_close(fn(x), torch.sin(torch.exp(torch.sin(torch.exp(x) * 2.0)) * 2.0))
    plan = squall.last_traces(fn).plan
    assert [r.reused for r in plan.regions] == [False, True]
    assert len(fuser.compiled_sources) == 1


def test_calls_a_fusion_pass_leaves_out_go_to_torch():
    fuser = PyFuser(min_region_size=3)

    def program(x):
        return torch.sin(torch.exp(x))  # exp alone: a region of one op, below the minimum

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(5)
    torch.testing.assert_close(fn(x), torch.sin(torch.exp(x)))
    (d,) = _decisions(fn, "torch.exp")
    assert d.executor == "torch"
    assert d.declined == [("pyfuse", "fusion pass left it out: a region of 1 call, below this executor's minimum of 3")]
    assert squall.last_traces(fn).plan.regions == []


class _Handback(PyFuser):
    """A fuser that hands back every region holding an add, saying why."""

    def __init__(self):
        super().__init__("handback")
        self.declined_regions = 0

    def compile_region(self, region):
        if any(c.sym.id == "prims.add" for c in region.calls):
            self.declined_regions += 1
            return Declined("adds are slow here (measured: 2 ms against 1 ms)")
        return super().compile_region(region)


def test_a_region_handed_back_with_a_reason_says_why_in_explain():
    fuser = _Handback()

    def program(x):
        a = torch.exp(x) + 1.0  # region 0: handed back, with a reason
        b = torch.sin(a)  # not fusible
        return torch.exp(b) * 2.0  # region 1: compiled

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(6)
    torch.testing.assert_close(fn(x), torch.exp(torch.sin(torch.exp(x) + 1.0)) * 2.0)
    plan = squall.last_traces(fn).plan
    assert [r.ops for r in plan.regions] == [["torch.exp", "torch.mul"]]
    why = "fusion pass left it out: adds are slow here (measured: 2 ms against 1 ms)"
    for op in ("torch.exp", "torch.add"):
        first = _decisions(fn, op)[0]
        assert first.executor == "torch" and first.declined == [("handback", why)]
    assert [d.declined for d in _decisions(fn, "torch.mul")] == [[]]  # compiled in region 1
    text = str(squall.explain(fn, x))
    assert "handed back by handback (torch.exp, torch.add): adds are slow here (measured: 2 ms against 1 ms)" in text
    assert fuser.declined_regions == 1  # planned twice (jit, explain): the declined region is remembered


def test_a_region_whose_compile_raises_is_handed_back_with_the_error():
    class Broken(PyFuser):
        def compile_region(self, region):
            raise RuntimeError("no kernel today")

    fn = squall.jit(lambda x: torch.exp(x) * 2.0, executors=[Broken("broken"), make_executor()])
    x = torch.randn(3)
    torch.testing.assert_close(fn(x), torch.exp(x) * 2.0)
    (d,) = _decisions(fn, "torch.exp")
    assert d.declined == [("broken", "fusion pass left it out: compile_region raised RuntimeError: no kernel today")]
    assert any("no kernel today" in e for e in squall.last_traces(fn).plan.errors)


def test_a_region_declined_without_a_reason_gets_the_generic_message():
    class Silent(PyFuser):
        def compile_region(self, region):
            return None

    fn = squall.jit(lambda x: torch.exp(x) * 2.0, executors=[Silent("silent"), make_executor()])
    x = torch.randn(3)
    torch.testing.assert_close(fn(x), torch.exp(x) * 2.0)
    (d,) = _decisions(fn, "torch.exp")
    assert d.declined == [("silent", "claimed it, but its fusion pass left it out")]
    assert "handed back by" not in str(squall.explain(fn, x))


class _CannotCompileAdds(PyFuser):
    """A fuser that fails to compile any region holding an add, and says its parts may compile."""

    def __init__(self):
        super().__init__("no_adds")
        self.attempts: list[list[str]] = []

    def compile_region(self, region):
        self.attempts.append([c.sym.id for c in region.calls])
        if any(c.sym.id == "prims.add" for c in region.calls):
            return Declined("no add kernel here", split=True)
        return super().compile_region(region)


def test_a_region_that_fails_to_compile_is_split_so_the_calls_around_the_culprit_still_fuse():
    def program(x):
        a = torch.exp(x) * 2.0
        b = a + 1.0  # the one call the fuser cannot compile
        return torch.exp(b) * 2.0

    fuser = _CannotCompileAdds()
    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(7)
    torch.testing.assert_close(fn(x), program(x))
    plan = squall.last_traces(fn).plan
    # the whole program failed; its halves in trace order: (exp, mul) compiled, (add, exp, mul) failed
    # and was halved again: the add alone failed, the second (exp, mul) reused the first's compilation
    assert [r.ops for r in plan.regions] == [["torch.exp", "torch.mul"], ["torch.exp", "torch.mul"]]
    assert plan.regions[1].reused
    (add,) = _decisions(fn, "torch.add")
    assert add.executor == "torch" and add.declined == [("no_adds", "fusion pass left it out: no add kernel here")]
    assert len(fuser.attempts) == 4 and all("prims.add" in a for a in fuser.attempts[:1] + fuser.attempts[2:])


def test_a_region_does_not_return_what_an_eval_mode_dropout_between_its_calls_reads():
    def program(x):
        a = torch.exp(x) * 2.0
        a = torch.nn.functional.dropout(a, p=0.5, training=False)  # returns its input: computes nothing
        return torch.exp(a) * 3.0

    fn = squall.jit(program, executors=[PyFuser(), make_executor()])
    x = torch.randn(5)
    torch.testing.assert_close(fn(x), program(x))
    (region,) = squall.last_traces(fn).plan.regions
    assert len(region.outputs) == 1  # the program's result only, not the tensor the dropout read
    assert "dropout" not in str(squall.last_traces(fn)[-1])


def test_a_planned_copy_of_a_call_keeps_every_field_but_its_executor():
    from squall.frontend.tracing import trace_program
    from squall.symbol import BoundSymbol

    trace, _ = trace_program(lambda x: torch.nn.functional.gelu(x, approximate="tanh") * 2, (torch.randn(3),), {})
    bsym = trace.bsyms[0]
    torch_executor = make_executor()
    planned = bsym.with_executor(torch_executor, len)
    renamed = bsym.from_bsym(grad_enabled=False)
    fields = [name.lstrip("_") for name in BoundSymbol.__slots__ if name not in ("_inputs", "_outputs")]
    for name in fields:
        expected = {"executor": torch_executor, "impl": len}.get(name, getattr(bsym, name))
        assert getattr(planned, name) is expected, name
        assert getattr(renamed, name) is (False if name == "grad_enabled" else getattr(bsym, name)), name
    assert bsym.call_keywords == {"approximate"} and planned.input_proxies() == bsym.input_proxies()


def test_a_forward_region_marks_the_values_only_its_backward_reads_as_layout_free():
    """FusionRegion.layout_free: a value the forward returns only for its backward, read by no call
    outside its region, may come back in the executor's own layout; a value another forward call
    reads, or the user gets, keeps eager's strides."""
    seen = []

    class Recording(PyFuser):
        def compile_region(self, region):
            seen.append(([p.name for p in region.outputs], region.layout_free))
            return super().compile_region(region)

    def program(x):
        e = torch.exp(x)  # saved for exp's backward, read by nothing outside the region
        a = e * 2.0  # read by sin (torch), saved for sin's backward
        return torch.sin(a), e * 3.0  # the second output is the user's

    x = torch.randn(8, requires_grad=True)
    fn = squall.jit(program, executors=[Recording(), make_executor()])
    s, t = fn(x)
    (s.sum() + t.sum()).backward()
    expected = torch.exp(x.detach()) * (2.0 * torch.cos(torch.exp(x.detach()) * 2.0) + 3.0)
    torch.testing.assert_close(x.grad, expected)
    # the forward region (exp, mul, mul) returns e, a and the user's e * 3.0: only e is layout-free
    (forward_outputs, free), (backward_outputs, backward_free) = seen
    assert len(forward_outputs) == 3 and free == (0,), seen
    assert backward_free == (), seen  # a backward's values are no forward's saved ones


class SideBySideFuser(PyFuser):
    """PyFuser compiling up to two regions at once (`parallel_compiles`): its first two compiles each
    wait for the other at a barrier, so they complete only where they ran side by side."""

    def __init__(self):
        super().__init__("sidefuse")
        self.barrier = threading.Barrier(2, timeout=5)
        self.compiled_in: list[tuple[str, list[str]]] = []  # (thread name, the region's input names)
        self._lock = threading.Lock()

    def parallel_compiles(self) -> int:
        return 2

    def compile_region(self, region):
        with self._lock:
            self.compiled_in.append((threading.current_thread().name, [p.name for p in region.inputs]))
            first_two = len(self.compiled_in) <= 2
        if first_two:
            self.barrier.wait()  # one region after another: BrokenBarrierError, the region declined
        return super().compile_region(region)


def test_a_fusion_executor_compiles_independent_regions_side_by_side_and_a_region_reading_another_after_it():
    fuser = SideBySideFuser()

    def program(x):
        a = torch.exp(x) * 2.0  # region A
        b = torch.exp(torch.sin(a)) * 3.0  # region B: reads sin's output, not a region's
        return torch.exp(torch.sin(b)) * a  # region C reads A's output: compiled after A, in the pass

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(8)
    torch.testing.assert_close(fn(x), program(x))
    assert fuser.compile_errors == []
    assert len(squall.last_traces(fn).plan.regions) == 3
    ahead, after = fuser.compiled_in[:2], fuser.compiled_in[2:]
    assert all(name.startswith("squall-sidefuse-compile") for name, _ in ahead), ahead
    assert after == [(threading.current_thread().name, after[0][1])] and len(after[0][1]) == 2, after


def test_a_fusion_executor_that_compiles_one_region_at_a_time_compiles_in_the_passs_thread():
    fuser = PyFuser()
    seen: list[str] = []
    compile_region = fuser.compile_region
    fuser.compile_region = lambda region: seen.append(threading.current_thread().name) or compile_region(region)

    def program(x):
        return torch.exp(torch.sin(torch.exp(x) * 2.0)) * 3.0

    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(8)
    torch.testing.assert_close(fn(x), program(x))
    assert seen == [threading.current_thread().name] * 2
