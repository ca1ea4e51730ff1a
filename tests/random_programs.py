"""Seeded random programs over tensors whose sizes change from call to call, for
tests/test_random_programs.py (and longer runs by hand: `python tests/random_programs.py 0 2000`).

A program is Python source, `def f(x, y, z, w):` then a chain of statements drawn from the
op families below: elementwise, broadcasting, reductions, reshapes with -1, slices with
size-derived bounds, split/chunk, cat/stack, expand/repeat, permutes, matmuls, masks,
index_select/gather, factories sized by sizes, control flow and arithmetic on sizes, writes
into views. Each value's shape is a tuple of labels: "B", "N", "K" (the call's sizes), "Y"
(a batch that is 1 or B: broadcasting changes meaning there), "1", or a fresh label for a size
the program derives (`x.shape[1] // 2`); ops are drawn so shapes fit whatever the sizes, and
eager is the judge where they do not (a call eager rejects must be rejected too).
"""
from __future__ import annotations

import random
import sys
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["generate", "size_sets", "inputs_for", "check_program", "INPUT_SHAPES"]

INPUT_SHAPES = {"x": ("B", "N"), "y": ("Y", "N"), "z": ("B", "N", "K"), "w": ("N", "K")}


def _broadcast(a: tuple, b: tuple) -> tuple | None:
    """The broadcast of two label shapes where it holds for every size (None where it may not)."""
    n = max(len(a), len(b))
    a, b = ("1",) * (n - len(a)) + a, ("1",) * (n - len(b)) + b
    out = []
    for p, q in zip(a, b):
        if p == q or q == "1":
            out.append(p)
        elif p == "1":
            out.append(q)
        elif {p, q} == {"Y", "B"}:
            out.append("B")
        else:
            return None
    return tuple(out)


class _Program:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lines: list[str] = []
        self.shapes: dict[str, tuple] = dict(INPUT_SHAPES)
        self.fresh = 0

    def size(self) -> str:
        self.fresh += 1
        return f"d{self.fresh}"

    def emit(self, expr: str, shape: tuple) -> None:
        name = f"v{len([n for n in self.shapes if n.startswith('v')]) + 1}"
        self.lines.append(f"    {name} = {expr}")
        self.shapes[name] = tuple(shape)

    def pick(self, min_rank: int = 0) -> str:
        """A value of at least `min_rank` dimensions, recent ones more likely."""
        names = [n for n, s in self.shapes.items() if len(s) >= min_rank]
        return names[max(0, len(names) - 1 - int(abs(self.rng.gauss(0, 2.5))))]

    def dim(self, a: str) -> int:
        return self.rng.randrange(len(self.shapes[a]))


def _unary(p: _Program) -> None:
    a = p.pick()
    f = p.rng.choice(["torch.sin({})", "torch.tanh({})", "torch.relu({})", "({} * 2 + 1)", "{}.neg()", "torch.sigmoid({})",
                      "{}.abs()", "torch.nn.functional.gelu({})", "{}.clamp(-0.5, 0.5)", "({} * 10).long() // 3 * 0.1"])
    p.emit(f.format(a), p.shapes[a])


def _binary(p: _Program) -> None:
    a = p.pick()
    others = [n for n, s in p.shapes.items() if n != a and _broadcast(p.shapes[a], s) is not None]
    if not others:
        return _unary(p)
    b = p.rng.choice(others)
    out = _broadcast(p.shapes[a], p.shapes[b])
    form = p.rng.choice(["{a} + {b}", "{a} - {b}", "{a} * {b}", "torch.maximum({a}, {b})", "torch.where({a} > 0, {a}, {b})", "torch.lerp({a}, {b}, 0.3)"])
    p.emit(form.format(a=a, b=b), out)


def _reduce(p: _Program) -> None:
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    dd = d - len(s) if p.rng.random() < 0.3 else d
    keep = p.rng.random() < 0.5
    f = p.rng.choice(["sum", "mean", "amax", "all", "softmax", "cumsum", "logsumexp", "var", "norm", "argmax"])
    reduced = s[:d] + ("1",) * keep + s[d + 1 :]
    if f == "all":
        p.emit(f"{a}.sum()", ())
    elif f in ("softmax", "cumsum"):
        p.emit(f"{a}.{f}({dd})", s)
    elif f == "var":
        p.emit(f"{a}.var({dd}, keepdim={keep}, correction=0)", reduced)
    elif f == "norm":
        p.emit(f"{a}.norm(dim={dd}, keepdim={keep})", reduced)
    elif f == "argmax":
        p.emit(f"{a}.argmax({dd}, keepdim={keep}).float()", reduced)
    else:
        p.emit(f"{a}.{f}({dd}, keepdim={keep})", reduced)


def _reshape(p: _Program) -> None:
    a = p.pick(1)
    s = p.shapes[a]
    c = p.rng.randrange(6)
    if c == 0 or len(s) < 2:
        d = p.rng.randrange(len(s) + 1)
        p.emit(f"{a}.unsqueeze({d})", s[:d] + ("1",) + s[d:]) if p.rng.random() < 0.5 else p.emit(f"{a}.reshape(-1)", (p.size(),))
    elif c == 1:
        p.emit(f"{a}.reshape({a}.shape[0], -1)", (s[0], p.size()))
    elif c == 2:
        p.emit(f"{a}.flatten({len(s) - 2})", s[:-2] + (p.size(),))
    elif c == 3:
        p.emit(f"{a}.contiguous().view(-1, {a}.shape[-1])", (p.size(), s[-1]))
    elif c == 4:
        # an even prefix of the last dimension, folded in pairs
        p.emit(f"{a}[..., : {a}.shape[-1] // 2 * 2].unflatten(-1, (-1, 2)).sum(-1)", s[:-1] + (p.size(),))
    else:
        d = p.dim(a)
        p.emit(f"{a}.squeeze({d})", s[:d] + s[d + 1 :] if s[d] == "1" else s)


def _slice(p: _Program) -> None:
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    pre, n = ":, " * d, f"{a}.shape[{d}]"
    if p.rng.random() < 0.15:
        p.emit(f"{a}[{pre}-1]", s[:d] + s[d + 1 :])
        return
    form = p.rng.choice([f"{a}[{pre}: {n} // 2]", f"{a}[{pre}1:]", f"{a}[{pre}-3:]", f"{a}[{pre}2:-1]", f"{a}[{pre}:100]",
                         f"{a}[{pre}::2]", f"{a}[{pre}{n} - 2:]", f"{a}.narrow({d}, 0, {n} // 2)", f"{a}[{pre}-{n}:]",
                         f"{a}.narrow({d}, {n} // 3, {n} - {n} // 3)", f"{a}[{pre}: max(1, {n} - x.shape[0])]", f"{a}[{pre}-100:{n} // 3 + 1]"])
    p.emit(form, s[:d] + (p.size(),) + s[d + 1 :])


def _split(p: _Program) -> None:
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    k = p.rng.choice([0, -1, 1])
    c = p.rng.randrange(5)
    if c == 3:
        p.emit(f"{a}.unbind({d})[{k}]", s[:d] + s[d + 1 :])
    elif c == 4:
        p.emit(f"{a} * len(torch.chunk({a}, 3, {d})) + len({a}.split(2, {d}))", s)
    else:
        form = [f"torch.chunk({a}, 3, {d})[{k}]", f"{a}.split(2, {d})[{k}]", f"{a}.split([1, {a}.shape[{d}] - 1], {d})[{k}]"][c]
        p.emit(form, s[:d] + (p.size(),) + s[d + 1 :])


def _join(p: _Program) -> None:
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    fits = [n for n, t in p.shapes.items() if len(t) == len(s) and all(x == y for i, (x, y) in enumerate(zip(s, t)) if i != d)]
    b = p.rng.choice(fits)
    if p.shapes[b] == s and p.rng.random() < 0.3:
        p.emit(f"torch.stack([{a}, {b}], {d})", s[:d] + ("2",) + s[d:])
    else:
        p.emit(f"torch.cat([{a}, {b}], {d})", s[:d] + (p.size(),) + s[d + 1 :])


def _expand(p: _Program) -> None:
    a = p.pick(1)
    s = p.shapes[a]
    c = p.rng.randrange(4)
    ones = [i for i, x in enumerate(s) if x in ("1", "Y")]
    if c == 0:
        p.emit(f"{a}.unsqueeze(0).expand(3, *{a}.shape)", ("3",) + s)
    elif c == 1:
        reps = [p.rng.choice([1, 2]) for _ in s]
        p.emit(f"{a}.repeat({', '.join(map(str, reps))})", tuple(x if r == 1 else p.size() for x, r in zip(s, reps)))
    elif c == 2 and ones:
        i = ones[0]
        src = [n for n, t in p.shapes.items() if len(t) > i and t[i] in ("B", "Y") and s[i] in ("Y", "1")]
        if src:
            b = p.rng.choice(src)
            sizes = ", ".join(f"{b}.shape[{i}]" if j == i else "-1" for j in range(len(s)))
            p.emit(f"{a}.expand({sizes})", s[:i] + (p.shapes[b][i],) + s[i + 1 :])
        else:
            p.emit(f"{a}.expand_as({a})", s)
    else:
        d = p.dim(a)
        p.emit(f"{a}.repeat_interleave(2, {d})", s[:d] + (p.size(),) + s[d + 1 :])


def _permute(p: _Program) -> None:
    a = p.pick(2)
    s = p.shapes[a]
    if len(s) < 2:
        return _unary(p)
    perm = list(range(len(s)))
    p.rng.shuffle(perm)
    tail = ".contiguous()" if p.rng.random() < 0.3 else ""
    p.emit(f"{a}.permute({', '.join(map(str, perm))}){tail}", tuple(s[i] for i in perm))


def _matmul(p: _Program) -> None:
    a = p.pick(2)
    s = p.shapes[a]
    if len(s) < 2:
        return _unary(p)
    fits = [n for n, t in p.shapes.items() if len(t) >= 2 and t[-2] == s[-1] and _broadcast(s[:-2], t[:-2]) is not None]
    if fits and p.rng.random() < 0.6:
        b = p.rng.choice(fits)
        t = p.shapes[b]
        p.emit(f"{a} @ {b}", _broadcast(s[:-2], t[:-2]) + (s[-2], t[-1]))
    elif len(s) == 3 and p.rng.random() < 0.5:
        p.emit(f"torch.bmm({a}, {a}.transpose(1, 2))", (s[0], s[1], s[1]))
    else:
        p.emit(f"torch.matmul({a}, {a}.transpose(-1, -2)) / max({a}.shape[-1], 1)", s[:-1] + (s[-2],))


def _mask(p: _Program) -> None:
    a = p.pick()
    c = p.rng.randrange(4)
    if c == 3 and p.shapes[a]:
        n = f"{a}.shape[-1]"
        p.emit(f"{a}.masked_fill(torch.arange({n}) > {n} // 2, float('-inf')).softmax(-1)", p.shapes[a])
        return
    form = [f"{a}.masked_fill({a} > 0.3, 0.5)", f"{a} * ({a} < 0).to({a}.dtype)", f"torch.where({a}.abs() < 0.5, torch.zeros_like({a}), {a})", ""][c]
    p.emit(form or f"{a} * 2", p.shapes[a])


def _index(p: _Program) -> None:
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    n = f"{a}.shape[{d}]"
    c = p.rng.randrange(5)
    if c == 0:
        p.emit(f"{a}.index_select({d}, torch.arange(0, {n}, 2))", s[:d] + (p.size(),) + s[d + 1 :])
    else:
        form = [None, f"{a}.flip({d})", f"{a}.index_select({d}, torch.arange({n} - 1, -1, -1))",
                f"{a}.gather({d}, torch.zeros_like({a}, dtype=torch.long))", f"{a}.roll({n} // 2, {d})"][c]
        p.emit(form, s)


def _factory(p: _Program) -> None:
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    c = p.rng.randrange(7)
    if c == 0:
        zeros = f"{a}.new_zeros({', '.join(f'{a}.shape[{i}]' if i != d else '2' for i in range(len(s)))})"
        p.emit(f"torch.cat([{a}, {zeros}], {d})", s[:d] + (p.size(),) + s[d + 1 :])
        return
    form = [None, f"{a} + {a}.new_ones({a}.shape)", f"{a} + torch.full({a}.shape, float({a}.shape[{d}]))",
            f"{a} + torch.zeros({a}.size(), dtype={a}.dtype)", f"{a} + torch.arange({a}.shape[-1]) / 10",
            f"{a} * torch.arange({a}.shape[-1], dtype={a}.dtype, device={a}.device)", f"{a} + torch.linspace(0, 1, {a}.shape[-1])"][c]
    p.emit(form, s)


def _sizes(p: _Program) -> None:
    """Python arithmetic on sizes, as numbers and in control flow."""
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    c = p.rng.randrange(7)
    if c < 4:
        form = [f"{a} / max({a}.numel(), 1)", f"{a} + len({a})", f"{a} * ({a}.shape[-1] % 3) + {a}.size(0) // 2", f"{a} * {a}.dim() + {a}.ndim"][c]
        p.emit(form, s)
        return
    if c == 4:
        name = f"v{len([n for n in p.shapes if n.startswith('v')]) + 1}"
        p.lines += [f"    {name} = {a}.sum({d})", f"    for i in range(min({a}.shape[{d}], 3)):", f"        {name} = {name} + {a}[{':, ' * d}i]"]
        p.shapes[name] = s[:d] + s[d + 1 :]
        return
    others = [n for n, t in p.shapes.items() if t and n != a]
    cmp, t = p.rng.choice([">", ">=", "==", "<", "!="]), p.rng.choice([1, 2, 3, 4, 6])
    cond = p.rng.choice([f"{a}.shape[{d}] {cmp} {t}", f"{a}.numel() {cmp} {t * 4}", f"len({a}) {cmp} {t}",
                         f"{a}.shape[{d}] {cmp} {p.rng.choice(others)}.shape[0]" if others else "True"])
    name = f"v{len([n for n in p.shapes if n.startswith('v')]) + 1}"
    p.lines += [f"    if {cond}:", f"        {name} = {a} * 2", "    else:", f"        {name} = {a} - {a}.shape[{d}]"]
    p.shapes[name] = s


def _write(p: _Program) -> None:
    """Writes into a copy, through views with size-derived bounds."""
    a = p.pick(1)
    s, d = p.shapes[a], p.dim(a)
    pre, n = ":, " * d, f"{a}.shape[{d}]"
    name = f"v{len([n for n in p.shapes if n.startswith('v')]) + 1}"
    write = p.rng.choice([f"{name}[{pre}: {n} // 2] += 1", f"{name}[{pre}-1:] = 0", f"{name}.narrow({d}, 0, {n} // 2).mul_(3)",
                          f"{name}[{name} > 0.5] = 0.5", f"{name}[{pre}-1].fill_(2)", f"{name}[{pre}{n} - 1] = 2"])
    p.lines += [f"    {name} = {a}.clone()", f"    {write}"]
    p.shapes[name] = s


_FAMILIES: list[tuple[Callable[[_Program], None], float]] = [
    (_unary, 3), (_binary, 4), (_reduce, 2), (_reshape, 2), (_slice, 3), (_split, 2), (_join, 2), (_expand, 1.5), (_permute, 2),
    (_matmul, 1.5), (_mask, 1), (_index, 1.5), (_factory, 1.5), (_sizes, 2), (_write, 1.5),
]


def generate(seed: int) -> str:
    """The source of program `seed`: `def f(x, y, z, w):`, 3 to 10 statements, one or two results."""
    rng = random.Random(seed)
    p = _Program(rng)
    families, weights = zip(*_FAMILIES)
    for _ in range(rng.randint(3, 10)):
        rng.choices(families, weights)[0](p)
    made = [n for n in p.shapes if n.startswith("v")]
    results = [made[-1]] + ([rng.choice(made[:-1])] if len(made) > 2 and rng.random() < 0.5 else [])
    return "def f(x, y, z, w):\n" + "\n".join(p.lines) + f"\n    return {', '.join(results)}\n"


def size_sets(seed: int, calls: int | None = None) -> list[dict[str, int]]:
    """The sizes of each call of program `seed`: a first set, then sets that change some sizes
    (0, 1, 2 among them), Y either 1 or B, and sometimes a return to an earlier set."""
    rng = random.Random(seed * 7919 + 1)
    first = dict(B=rng.choice([2, 3, 4]), N=rng.choice([4, 5, 8]), K=rng.choice([3, 4, 6]))
    sets = []
    for i in range(calls or rng.randint(4, 6)):
        sizes = dict(first)
        for k in sizes if i else ():
            if rng.random() < 0.5:
                sizes[k] = rng.choice([0, 1, 1, 2, 2, 3, 4, 5, 7, 8, 9, 16])
        sizes["Y"] = rng.choice([1, sizes["B"]])
        sets.append(sizes)
    if rng.random() < 0.5:
        sets.append(dict(sets[rng.randrange(len(sets))]))
    return sets


def inputs_for(sizes: dict[str, int], seed: int, transposed: bool = False) -> list[torch.Tensor]:
    """Random inputs of those sizes; with `transposed`, each of 2 or more dimensions laid out
    in reverse (the same shape, other strides)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for shape in INPUT_SHAPES.values():
        dims = [sizes[label] for label in shape]
        if transposed and len(dims) >= 2:
            out.append(torch.randn(*reversed(dims), generator=g).permute(*reversed(range(len(dims)))))
        else:
            out.append(torch.randn(*dims, generator=g))
    return out


def _compare(actual: Any, expected: Any, path: str = "result") -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__} where eager returns a tensor"
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4, equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), f"{path}: {actual!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} where eager returns {expected!r}"


def check_program(seed: int, jit: Callable[[Callable], Callable], transposed: bool = False, squall_warnings: bool = False) -> list[str]:
    """Program `seed` jitted with `jit` and called over its size sets beside eager: what went
    wrong at each call (a different result, an error where eager runs, a result where eager
    raises), in words; [] where every call answered as eager did. UserWarnings raised during
    the calls are silenced, squall's own too unless `squall_warnings`."""
    from squall.ltorch.base import SquallWarning

    namespace: dict[str, Any] = {"torch": torch}
    exec(generate(seed), namespace)  # noqa: S102 - the program this module generated
    fn = namespace["f"]
    jitted = jit(fn)
    problems = []
    for i, sizes in enumerate(size_sets(seed)):
        args = inputs_for(sizes, seed * 100 + i, transposed=transposed and i % 2 == 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # eager's own (var of one element)
            if squall_warnings:
                warnings.simplefilter("always", SquallWarning)
            try:
                expected, eager_error = fn(*args), None
            except Exception as e:  # noqa: BLE001 - eager is the judge of what is valid
                expected, eager_error = None, e
            try:
                actual, error = jitted(*args), None
            except Exception as e:  # noqa: BLE001
                actual, error = None, e
        where = f"call {i} {sizes}"
        if eager_error is not None:
            if error is None:
                problems.append(f"{where}: returned where eager raises {eager_error!r}")
            continue
        if error is not None:
            problems.append(f"{where}: raised where eager runs: {''.join(traceback.format_exception(error))[-1500:]}")
            continue
        try:
            _compare(actual, expected)
        except AssertionError as e:
            problems.append(f"{where}: {e}")
    return problems


if __name__ == "__main__":  # python tests/random_programs.py FIRST COUNT [--fused]: problems printed
    import squall
    from squall.ltorch.base import SquallWarning

    first, count = int(sys.argv[1]), int(sys.argv[2])
    if "--fused" in sys.argv[3:]:
        # inductor's claims: every region it can take (matmuls too, however small) compiled at the call,
        # without the judge or the cost model that would keep small programs on torch; a SquallWarning
        # (a region inductor could not compile, a call run eagerly) is reported beside the program
        from squall_inductor import InductorExecutor

        def fused(f):
            inductor = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
            inductor.compiles_in_background = False
            return squall.jit(f, executors=[inductor, "torch"])

        modes = {"fused": (fused, False), "fused, strides": (fused, True)}
    else:
        modes = {"auto": (squall.jit, False), "dynamic": (lambda f: squall.jit(f, dynamic=True), False), "strides": (squall.jit, True)}
    failed = 0
    for seed in range(first, first + count):
        for mode, (jit, transposed) in modes.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", SquallWarning)
                problems = check_program(seed, jit, transposed, squall_warnings=True)
            warned = sorted({str(w.message) for w in caught if issubclass(w.category, SquallWarning)})
            if problems or warned:
                failed += bool(problems)
                said = "".join(f"\nwarned: {w}" for w in warned)
                print(f"### program {seed} ({mode})\n{generate(seed)}" + "\n".join(problems) + said, flush=True)
        if (seed - first + 1) % 100 == 0:
            print(f"{seed - first + 1} programs: {failed} failed", flush=True)
    print(f"{count} programs, {len(modes)} modes: {failed} failed")
