"""The apex_xentropy executor: cross_entropy through apex's fused softmax cross-entropy kernel.

NVIDIA apex builds the extension module `xentropy_cuda` (from apex/contrib/csrc/xentropy,
with `APEX_XENTROPY=1` or `--xentropy`). What it computes, read from its source:

- `xentropy_cuda.forward(logits, labels, smoothing, half_to_float) -> [losses, max_log_sum_exp]`
  for 2-D logits (float32, float16 or bfloat16; one CUDA block per row) and 1-D int64
  labels. `losses` is float32 of shape [N] whatever the logits' dtype, and per row is
  `(1 - smoothing) * (lse - x[label]) + smoothing * (lse - mean(x))`, with
  `lse = max + log(sum(exp(x - max)))`; `max_log_sum_exp` is that lse (float32 when
  `half_to_float`, else the logits' dtype). The kernel reads `x[label]` unchecked, and
  knows nothing of padding: apex's own wrapper zeroes the losses of padded rows afterwards.
- `xentropy_cuda.backward(grad_loss, logits, max_log_sum_exp, labels, smoothing) -> grad_logits`
  `= grad_loss * (softmax(x) - (1 - smoothing) * onehot(label) - smoothing / C)`; it treats
  the call as half_to_float when `grad_loss`'s dtype differs from the logits' (then it must
  be float32). Again no padding: the caller zeroes `grad_loss` on padded rows first.

PyTorch's label smoothing is `(1 - s) * nll + (s / C) * sum_c(-log q_c)`, and
`-sum_c log q_c / C = lse - mean(x)`: the same per-row value, so every smoothing in [0, 1]
is accepted. PyTorch's mean divides both terms by the count of non-ignored rows, which is
what `reduce_loss` below does with the ignored rows' losses zeroed.
"""
from __future__ import annotations

import importlib
import importlib.util

import torch

from squall.extend import Availability, GradCall, GradRule, OperatorExecutor, TensorProxy

__all__ = ["make_executor", "cross_entropy_checker", "availability_from", "EXTENSION", "KERNEL_DTYPES"]

EXTENSION = "xentropy_cuda"  # the module apex's setup.py builds with --xentropy
# DISPATCH_FLOAT_HALF_AND_BFLOAT in xentropy_kernel.cu (bfloat16 since apex PR #1720, 2023)
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_HALF_TO_FLOAT = (torch.float16, torch.bfloat16)
_REDUCTIONS = ("none", "mean", "sum")
_INT_MAX = 2**31 - 1  # the backward kernel takes the class count as an int
BUILD_HINT = "build NVIDIA apex from source with APEX_XENTROPY=1 (see the squall-apex-xentropy README)"


def availability_from(*, has_extension: bool, has_apex: bool, has_cuda: bool) -> Availability:
    """Whether the executor can run, from what is installed here (a pure decision, so it is testable)."""
    if not has_extension:
        if has_apex:
            return Availability(False, f"apex is installed without its xentropy extension (module {EXTENSION!r} is missing); {BUILD_HINT}")
        return Availability(False, f"NVIDIA apex's xentropy extension (module {EXTENSION!r}) is not installed; {BUILD_HINT}")
    if not has_cuda:
        return Availability(False, "CUDA is not available (no CUDA device)")
    return Availability(True)


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    # torch's deprecated size_average/reduce arguments override `reduction`
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def cross_entropy_checker(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                          reduction="mean", label_smoothing=0.0) -> bool:
    """Whether apex's kernel computes this cross_entropy exactly as PyTorch does (called with proxies)."""
    if not (isinstance(input, TensorProxy) and isinstance(target, TensorProxy)):
        return False
    if input.device.type != "cuda" or target.device != input.device:
        return False
    if input.ndim != 2 or input.dtype not in KERNEL_DTYPES:
        return False
    # 1-D class indices (a target of the input's shape holds probabilities: not this kernel)
    if target.ndim != 1 or target.dtype != torch.int64 or target.shape[0] != input.shape[0]:
        return False
    rows, classes = input.shape
    if rows == 0 or classes == 0 or classes > _INT_MAX:
        return False
    if weight is not None:
        return False
    if _legacy_reduction(size_average, reduce, reduction) not in _REDUCTIONS:
        return False
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        return False
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        return False
    return 0.0 <= float(label_smoothing) <= 1.0


# --- the executor's own operations -------------------------------------------------------------


def _xentropy_forward_meta(logits: TensorProxy, target: TensorProxy, smoothing: float, ignore_index: int):
    rows = (logits.shape[0],)
    return (TensorProxy(shape=rows, dtype=torch.float32, device=logits.device),
            TensorProxy(shape=rows, dtype=torch.float32, device=logits.device))


def _xentropy_forward(logits: torch.Tensor, target: torch.Tensor, smoothing: float, ignore_index: int):
    """(float32 per-row losses, zero on ignored rows; float32 log-sum-exp per row)."""
    kernel = importlib.import_module(EXTENSION)
    ignored = target == ignore_index
    # the kernel reads logits[row, label] unchecked: an ignored row must point at a real class
    safe = target.masked_fill(ignored, 0).contiguous()
    if logits.dtype == torch.float32:
        losses, lse = kernel.forward(logits, safe, float(smoothing), False)
    else:
        losses, lse = kernel.forward(logits, safe, float(smoothing), True)  # lse kept in float32
    return losses.masked_fill_(ignored, 0), lse


def _xentropy_backward_meta(grad_losses, logits, max_log_sum_exp, target, smoothing, ignore_index):
    return TensorProxy(shape=logits.shape, dtype=logits.dtype, device=logits.device)


def _xentropy_backward(grad_losses: torch.Tensor, logits: torch.Tensor, max_log_sum_exp: torch.Tensor,
                       target: torch.Tensor, smoothing: float, ignore_index: int) -> torch.Tensor:
    """d(losses)/d(logits) times `grad_losses` (per row), zero on ignored rows."""
    kernel = importlib.import_module(EXTENSION)
    # float32 grads and lse with half logits select the kernel's half_to_float path
    grad_dtype = torch.float32 if logits.dtype in _HALF_TO_FLOAT else logits.dtype
    grad = grad_losses.to(grad_dtype).masked_fill(target == ignore_index, 0).contiguous()
    return kernel.backward(grad, logits, max_log_sum_exp.to(grad_dtype).contiguous(), target.contiguous(), float(smoothing))


def _reduce_loss_meta(losses: TensorProxy, target: TensorProxy, ignore_index: int, reduction: str, dtype: torch.dtype):
    shape = losses.shape if reduction == "none" else ()
    return TensorProxy(shape=shape, dtype=dtype, device=losses.device)


def _reduce_loss(losses: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str, dtype: torch.dtype) -> torch.Tensor:
    """PyTorch's reduction of per-row losses: a mean divides by the non-ignored rows (NaN if none)."""
    if reduction == "none":
        return losses.to(dtype)
    total = losses.sum()
    if reduction == "sum":
        return total.to(dtype)
    return (total / (target != ignore_index).sum()).to(dtype)


def _reduce_loss_backward_meta(grad: TensorProxy, target: TensorProxy, ignore_index: int, reduction: str):
    return TensorProxy(shape=target.shape, dtype=torch.float32, device=target.device)


def _reduce_loss_backward(grad: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str) -> torch.Tensor:
    """The per-row loss gradient `reduce_loss` passes back: float32 [N] (xentropy_backward zeroes ignored rows)."""
    rows = target.shape[0]
    if reduction == "none":
        return grad.to(torch.float32)
    if reduction == "sum":
        return grad.to(torch.float32).expand(rows)
    return (grad.to(torch.float32) / (target != ignore_index).sum()).expand(rows)


def make_executor() -> OperatorExecutor:
    """The apex_xentropy executor, whether or not apex and CUDA are here (users then see why not)."""
    ex = _ApexXentropyExecutor()
    forward = ex.register_operator("xentropy_forward", meta=_xentropy_forward_meta, fn=_xentropy_forward)
    backward = ex.register_operator("xentropy_backward", meta=_xentropy_backward_meta, fn=_xentropy_backward)
    reduce_loss = ex.register_operator("reduce_loss", meta=_reduce_loss_meta, fn=_reduce_loss)
    reduce_loss_backward = ex.register_operator("reduce_loss_backward", meta=_reduce_loss_backward_meta, fn=_reduce_loss_backward)

    def cross_entropy_transform(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                                reduction="mean", label_smoothing=0.0):
        losses, _ = forward(input, target, float(label_smoothing), ignore_index)
        return reduce_loss(losses, target, ignore_index, _legacy_reduction(size_average, reduce, reduction), input.dtype)

    def cross_entropy_forward(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                              reduction="mean", label_smoothing=0.0):
        # the forward keeps the log-sum-exp per row: the fused backward needs it
        losses, max_log_sum_exp = forward(input, target, float(label_smoothing), ignore_index)
        loss = reduce_loss(losses, target, ignore_index, _legacy_reduction(size_average, reduce, reduction), input.dtype)
        return loss, (max_log_sum_exp,)

    def cross_entropy_backward(call: GradCall):
        input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing = call.args
        (max_log_sum_exp,) = call.residuals
        grad_losses = reduce_loss_backward(call.g, target, ignore_index, _legacy_reduction(size_average, reduce, reduction))
        grad_input = backward(grad_losses, input, max_log_sum_exp, target, float(label_smoothing), ignore_index)
        return grad_input, None  # the class indices get no gradient

    ex.register_implementation("torch.nn.functional.cross_entropy", checker=cross_entropy_checker,
                               execution_transform=cross_entropy_transform,
                               grad_transform=GradRule(cross_entropy_backward, cross_entropy_forward))
    return ex


class _ApexXentropyExecutor(OperatorExecutor):
    def __init__(self) -> None:
        # ahead of fusion executors: one hand-written kernel beats a fused log_softmax + nll
        super().__init__("apex_xentropy", default_rank=10, supports_autograd=False)

    def is_available(self) -> Availability:
        return availability_from(has_extension=_found(EXTENSION), has_apex=_found("apex"), has_cuda=torch.cuda.is_available())
