"""A compiled region loaded from disk without importing inductor's compile stack.

Loading a region through inductor (`torch._inductor.CompiledArtifact.load`) imports Dynamo,
inductor's lowering and its autotuner (about 2 s on this CPU), and probes the CPU's vector
instruction sets again by building and loading test programs (about 2 s more), although every
kernel is already built. That was most of a warm process's time to fused speed.

What a compiled CPU region needs at run time is small: inductor's generated Python wrapper
(`call(args)`: buffer allocations, size/stride asserts, calls into BLAS/ATen and into its C++
kernels) and the kernels' shared libraries. The worker process (`direct_build`) saves both beside
the region's artifact, once it has checked that the wrapper, run from them alone, returns what the
artifact returns; this module loads them: each kernel library as the extension module inductor
built it as, the wrapper's source executed with the few names it imported from inductor given
here (`AsyncCompile`, whose `cpp_pybinding` returns the already built kernel, and
`extern_kernels`, the torch functions it names). Anything else makes `direct_build` save nothing,
and the region loads through inductor as before.
"""
from __future__ import annotations

import getpass
import hashlib
import importlib.util
import os
import pickle
import re
import sys
import tempfile
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["DIRECT_SUFFIX", "DirectBundle", "inductor_cache_dir", "keep_direct", "load_direct", "kernel_key", "run_direct", "BuiltKernels"]

# beside a kept region `<key>.bin`: `<key>.bin.direct` (the bundle) and `<key>.bin.<sha>.so` (its kernels)
DIRECT_SUFFIX = ".direct"
# inductor's input alignment (torch._inductor.utils.ALIGNMENT): its kernels assume it for the inputs it lists
_ALIGNMENT = 16


class DirectBundle(types.SimpleNamespace):
    """What `direct_build` saves for a region: `source` (inductor's wrapper, its inductor imports
    removed), `kernels` ({kernel_key: the built library's bytes}), `inputs_to_check` (the inputs
    whose alignment inductor checks at each call), `entries` ({kernel_key: the library's function
    name}) and `externs` ({name: dotted torch path} for the wrapper's `extern_kernels.<name>` calls)."""


def kernel_key(argtypes: Sequence[str], source: str) -> str:
    """The name a C++ kernel is kept by: a hash of its argument types and source."""
    return hashlib.sha256(repr((list(argtypes), source)).encode()).hexdigest()[:32]


def inductor_cache_dir() -> str:
    """inductor's cache folder (torch._inductor.runtime.cache_dir_utils.cache_dir's rule), read
    without importing torch._inductor, which loads Dynamo: $TORCHINDUCTOR_CACHE_DIR, else
    torchinductor_<user> in the temporary folder."""
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if folder is None:
        try:
            user = getpass.getuser()
        except (KeyError, ModuleNotFoundError, OSError):
            user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
        folder = os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    return os.path.abspath(folder)


def keep_direct(kept: str, bundle: bytes) -> None:
    """Write a pickled DirectBundle beside the kept artifact `kept`: each kernel library first, the
    bundle (naming them) last, each by an atomic rename, so a reader never sees half of one."""
    found: DirectBundle = pickle.loads(bundle)
    for key, library in found.kernels.items():
        _write(f"{kept}.{key}.so", library)
    found.kernels = {key: hashlib.sha256(library).hexdigest() for key, library in found.kernels.items()}
    _write(kept + DIRECT_SUFFIX, pickle.dumps(found))


def _write(target: str, data: bytes) -> None:
    temporary = f"{target}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, target)


def load_direct(kept: str) -> Callable | None:
    """The region kept at `kept`, loaded from its direct bundle (`f(*inputs)` -> inductor's list of
    outputs), or None where it has none. Raises where the bundle or a kernel library is damaged
    (a library whose bytes differ from what the bundle recorded, one that does not load)."""
    path = kept + DIRECT_SUFFIX
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        bundle: DirectBundle = pickle.load(f)
    kernels = {}
    for key, digest in bundle.kernels.items():
        library = f"{kept}.{key}.so"
        with open(library, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != digest:
                raise ValueError(f"the kernel library {library} is not the one compiled for this region")
        kernels[key] = _load_kernel(library, key, bundle.entries[key])
    return run_direct(bundle, BuiltKernels(kernels))


def run_direct(bundle: DirectBundle, kernels: Any) -> Callable:
    """The region's callable from its bundle, its wrapper given `kernels` as its AsyncCompile and,
    for inductor's C++ wrapper, its CppWrapperCodeCache (an object with `cpp_pybinding(argtypes,
    source)`, `wait(scope)` and `load_pybinding(argtypes=, main_code=, ...)`: BuiltKernels here)."""
    module = types.ModuleType(f"squall_inductor_region_{hashlib.sha256(bundle.source.encode()).hexdigest()[:16]}")
    externs = types.SimpleNamespace(**{name: _resolve(dotted) for name, dotted in bundle.externs.items()})
    module.__dict__.update(AsyncCompile=lambda: kernels, CppWrapperCodeCache=kernels, extern_kernels=externs)
    exec(compile(bundle.source, f"<squall-inductor region {module.__name__}>", "exec"), module.__dict__)  # noqa: S102 - inductor's own generated wrapper
    call, check = module.call, tuple(bundle.inputs_to_check)

    def region(*args: Any) -> Any:
        inputs = list(args)
        for i in check:
            if inputs[i].data_ptr() % _ALIGNMENT:  # inductor's kernels assume these aligned: an aligned copy
                inputs[i] = _aligned_copy(inputs[i])
        grad = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)  # as inductor's inference wrapper: its out= calls need it
        try:
            return call(inputs)
        finally:
            torch._C._set_grad_enabled(grad)

    return region


class BuiltKernels:
    """inductor's AsyncCompile for a wrapper whose kernels are already built and loaded ({kernel_key: kernel})."""

    def __init__(self, kernels: dict[str, Callable]):
        self.kernels = kernels

    def cpp_pybinding(self, argtypes: Sequence[str], source: str) -> Callable:
        return self.kernels[kernel_key(argtypes, source)]

    def load_pybinding(self, *, argtypes: Sequence[str], main_code: str, kernel_code: str | None = None, **_: Any) -> Callable:
        return self.kernels[kernel_key(argtypes, main_code + (kernel_code or ""))]

    def wait(self, scope: dict) -> None:
        pass


def _load_kernel(library: str, key: str, entry: str) -> Callable:
    """A kernel library inductor built as a Python extension module: its function `entry` (`kernel`,
    or the C++ wrapper's `inductor_entry_cpp`)."""
    # the library's start-up reads where torch keeps a tensor's data pointer accessor (inductor sets this too)
    os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)
    name = f"squall_inductor_kernel_{key}.{entry}"  # its init function is PyInit_<entry>, as inductor names it
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, library)
        if spec is None or spec.loader is None:
            raise ImportError(f"{library} is not a loadable library")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return getattr(module, entry)


def _resolve(dotted: str) -> Any:
    """A torch function by its dotted path (`torch.addmm`, `torch.ops.aten.mm.out`)."""
    head, *rest = dotted.split(".")
    if head != "torch":
        raise ValueError(f"{dotted} is not a torch function")
    found: Any = torch
    for part in rest:
        found = getattr(found, part)
    return found


def _aligned_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` with its sizes and strides in new (aligned) memory (inductor's clone_preserve_strides)."""
    needed = 0 if 0 in t.shape else sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1
    return torch.as_strided(torch.as_strided(t, (needed,), (1,)).clone(), t.shape, t.stride())


def memory_extent(shape: Sequence[int], stride: Sequence[int]) -> int:
    """How many elements a tensor with these sizes and strides reaches, from its first one."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
