"""OpInfos for loss functions."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from opinfos import FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor


def _t(shape, dtype, device, **kwargs):
    return make_tensor(shape, dtype, device, **kwargs)


def _targets(shape, n_classes, device, *, ignore=None):
    t = make_tensor(shape, torch.int64, device, low=0, high=n_classes)
    if ignore is not None and t.numel():
        t.view(-1)[::3] = ignore
    return t


def _class_samples(*, smoothing: bool):
    def samples(dtype, device):
        w = _t((4,), dtype, device, low=0.1, high=2)
        yield SampleInput((_t((5, 4), dtype, device), _targets((5,), 4, device)))
        yield SampleInput((_t((5, 4), dtype, device), _targets((5,), 4, device, ignore=-100)), {"weight": w})
        yield SampleInput((_t((5, 4), dtype, device), _targets((5,), 4, device, ignore=2)), {"ignore_index": 2, "reduction": "sum"})
        yield SampleInput((_t((5, 4), dtype, device), _targets((5,), 4, device)), {"reduction": "none", "weight": w})
        yield SampleInput((_t((2, 4, 3, 2), dtype, device), _targets((2, 3, 2), 4, device, ignore=-100)))
        yield SampleInput((_t((2, 4, 3), dtype, device), _targets((2, 3), 4, device)), {"reduction": "none"})
        yield SampleInput((_t((4,), dtype, device), _targets((), 4, device)))
        yield SampleInput((_t((0, 4), dtype, device), _targets((0,), 4, device)), {"reduction": "sum"})
        yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), _targets((4,), 6, device)), {"size_average": False})
        if smoothing:
            yield SampleInput((_t((5, 4), dtype, device), _targets((5,), 4, device, ignore=-100)), {"label_smoothing": 0.2, "weight": w})
            yield SampleInput((_t((2, 4, 3), dtype, device), _targets((2, 3), 4, device, ignore=1)), {"label_smoothing": 0.1, "ignore_index": 1, "reduction": "none"})
            yield SampleInput((_t((2, 4, 3), dtype, device), _targets((2, 3), 4, device)), {"label_smoothing": 0.3, "reduction": "sum", "weight": w})

    return samples


def _nll_samples(dtype, device):
    # nll_loss reads log-probabilities
    for s in _class_samples(smoothing=False)(dtype, device):
        yield SampleInput((torch.log_softmax(s.args[0].float(), _cdim(s.args[0])).to(dtype), s.args[1]), s.kwargs)


def _cdim(x):
    return 0 if x.ndim == 1 else 1


def _probability_samples(dtype, device):
    def probs(shape, dim):
        return torch.softmax(_t(shape, torch.float32, device), dim).to(dtype)

    w = _t((4,), dtype, device, low=0.1, high=2)
    yield SampleInput((_t((5, 4), dtype, device), probs((5, 4), 1)))
    yield SampleInput((_t((5, 4), dtype, device), probs((5, 4), 1)), {"weight": w, "reduction": "sum"})
    yield SampleInput((_t((2, 4, 3), dtype, device), probs((2, 4, 3), 1)), {"label_smoothing": 0.25, "reduction": "none"})
    yield SampleInput((_t((5, 4), dtype, device), probs((5, 4), 1)), {"label_smoothing": 0.1, "weight": w})
    yield SampleInput((_t((4,), dtype, device), probs((4,), 0)))


def _class_errors(name):
    def errors(device):
        x = _t((3, 4), torch.float32, device)
        yield ErrorInput(SampleInput((x, _targets((2,), 4, device))), ValueError, r"Expected input batch_size \(3\) to match target batch_size \(2\)")
        yield ErrorInput(SampleInput((x, _targets((3,), 4, device)), {"reduction": "average"}), ValueError, "average is not a valid value for reduction")
        yield ErrorInput(SampleInput((x, _targets((3,), 4, device)), {"weight": _t((3,), torch.float32, device)}), RuntimeError, "weight tensor should be defined either for all 4 classes")
        yield ErrorInput(SampleInput((_t((2, 4, 3), torch.float32, device), _targets((2, 5), 4, device))), RuntimeError, r"Expected target size \[2, 3\], got \[2, 5\]")
        if name == "nll_loss":
            yield ErrorInput(SampleInput((x, _t((3,), torch.float32, device))), RuntimeError, "expected target dtype to be Long or Byte")
        else:
            yield ErrorInput(SampleInput((x, _targets((3,), 4, device)), {"label_smoothing": 1.5}), RuntimeError, "label_smoothing must be between 0.0 and 1.0")
            yield ErrorInput(SampleInput((x, torch.softmax(x, 1)), {"ignore_index": 1}), RuntimeError, "ignore_index is not supported for floating point target")

    return errors


def _pointwise_samples(*kwarg_forms):
    def samples(dtype, device):
        yield SampleInput((_t((4, 5), dtype, device), _t((4, 5), dtype, device)))
        yield SampleInput((_t((), dtype, device), _t((), dtype, device)), {"reduction": "sum"})
        yield SampleInput((_t((2, 0, 3), dtype, device), _t((2, 0, 3), dtype, device)), {"reduction": "sum"})
        yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), _t((4, 6), dtype, device)), {"reduction": "none"})
        yield SampleInput((_t((3, 4), dtype, device), _t((3, 4), torch.float64, device)))
        for kw in kwarg_forms:
            yield SampleInput((_t((3, 4), dtype, device), _t((3, 4), dtype, device)), dict(kw))

    return samples


def _weighted_samples(dtype, device):
    yield SampleInput((_t((3, 4), dtype, device), _t((3, 4), dtype, device)), {"weight": _t((3, 4), dtype, device, low=0.1, high=2)})
    yield SampleInput((_t((3, 4), dtype, device), _t((3, 4), dtype, device)), {"weight": _t((3, 4), dtype, device, low=0.1, high=2), "reduction": "sum"})
    yield SampleInput((_t((3, 4), dtype, device), _t((3, 4), dtype, device)), {"weight": _t((3, 4), dtype, device, low=0.1, high=2), "reduction": "none"})


def _pointwise_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, _t((3, 4), torch.float32, device)), {"reduction": "avg"}), ValueError, "avg is not a valid value for reduction")
    yield ErrorInput(SampleInput((x, _t((2, 4), torch.float32, device))), RuntimeError, "must match the size")


def _bce_samples(dtype, device):
    def p(shape, **kw):
        return _t(shape, dtype, device, low=0.02, high=0.98, **kw)

    yield SampleInput((p((4, 5)), p((4, 5))))
    yield SampleInput((p((4, 5)), p((4, 5))), {"weight": _t((5,), dtype, device, low=0, high=2), "reduction": "sum"})
    yield SampleInput((p((3,)), p((3,))), {"reduction": "none"})
    yield SampleInput((torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=dtype, device=device), torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=dtype, device=device)))
    yield SampleInput((p(()), p(())))
    yield SampleInput((p((0, 2)), p((0, 2))), {"reduction": "sum"})


def _bce_errors(device):
    x = _t((3,), torch.float32, device, low=0.1, high=0.9)
    yield ErrorInput(SampleInput((x, _t((4,), torch.float32, device, low=0, high=1))), ValueError, "different to the input size")
    yield ErrorInput(SampleInput((x, _t((3,), torch.float64, device, low=0, high=1))), RuntimeError, "Found dtype")
    yield ErrorInput(SampleInput((x, x), {"reduction": "batchmean"}), ValueError, "batchmean is not a valid value for reduction")


def _bce_logits_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device), _t((4, 5), dtype, device, low=0, high=1)))
    yield SampleInput((_t((4, 5), dtype, device, low=-60, high=60), _t((4, 5), dtype, device, low=0, high=1)), {"reduction": "sum"})
    yield SampleInput((_t((4, 5), dtype, device), _t((4, 5), dtype, device, low=0, high=1)), {"weight": _t((5,), dtype, device, low=0, high=2)})
    yield SampleInput((_t((4, 5), dtype, device), _t((4, 5), dtype, device, low=0, high=1)), {"pos_weight": _t((5,), dtype, device, low=0.5, high=3), "reduction": "none"})
    yield SampleInput((_t((), dtype, device), _t((), dtype, device, low=0, high=1)))


def _bce_logits_errors(device):
    yield ErrorInput(SampleInput((_t((3,), torch.float32, device), _t((4,), torch.float32, device))), ValueError, "must be the same as input size")


def _kl_samples(dtype, device):
    def logp(shape):
        return torch.log_softmax(_t(shape, torch.float32, device), -1).to(dtype)

    def p(shape):
        return torch.softmax(_t(shape, torch.float32, device), -1).to(dtype)

    yield SampleInput((logp((4, 5)), p((4, 5))), {"reduction": "batchmean"})
    yield SampleInput((logp((4, 5)), p((4, 5))), {"reduction": "sum"})
    yield SampleInput((logp((4, 5)), logp((4, 5))), {"reduction": "none", "log_target": True})
    yield SampleInput((logp((4, 5)), torch.tensor([0.0, 0.5, 0.5, 0.0, 0.0], dtype=dtype, device=device)), {"reduction": "none"})
    yield SampleInput((logp((2, 3, 4)), logp((2, 3, 4))), {"reduction": "batchmean", "log_target": True})
    yield SampleInput((logp(()), p(())), {"reduction": "batchmean"})


def _kl_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, x), {"reduction": "avg"}), ValueError, "avg is not a valid value for reduction")


opinfos = [
    OpInfo("nll_loss", F.nll_loss, _nll_samples, FLOATING, error_inputs=_class_errors("nll_loss"), symbol="torch.nn.functional.nll_loss"),
    OpInfo("cross_entropy", F.cross_entropy, _class_samples(smoothing=True), FLOATING, error_inputs=_class_errors("cross_entropy"), symbol="torch.nn.functional.cross_entropy"),
    OpInfo("cross_entropy_probs", F.cross_entropy, _probability_samples, FLOATING, symbol="torch.nn.functional.cross_entropy"),
    OpInfo("mse_loss", F.mse_loss, _pointwise_samples({"reduction": "none"}, {"size_average": False}, {"reduce": False}), FLOATING, error_inputs=_pointwise_errors, symbol="torch.nn.functional.mse_loss"),
    OpInfo("mse_loss_weighted", F.mse_loss, _weighted_samples, FLOATING, symbol="torch.nn.functional.mse_loss"),
    OpInfo("l1_loss", F.l1_loss, _pointwise_samples({"reduction": "sum"}), FLOATING, error_inputs=_pointwise_errors, symbol="torch.nn.functional.l1_loss"),
    OpInfo("smooth_l1_loss", F.smooth_l1_loss, _pointwise_samples({"beta": 0.5}, {"beta": 0.0, "reduction": "none"}, {"beta": 2.0, "reduction": "sum"}), FLOATING, error_inputs=_pointwise_errors, symbol="torch.nn.functional.smooth_l1_loss"),
    OpInfo("huber_loss", F.huber_loss, _pointwise_samples({"delta": 0.5}, {"delta": 2.0, "reduction": "none"}), FLOATING, error_inputs=_pointwise_errors, symbol="torch.nn.functional.huber_loss"),
    OpInfo("huber_loss_weighted", F.huber_loss, _weighted_samples, FLOATING, symbol="torch.nn.functional.huber_loss"),
    OpInfo("binary_cross_entropy", F.binary_cross_entropy, _bce_samples, FLOATING, error_inputs=_bce_errors, symbol="torch.nn.functional.binary_cross_entropy"),
    OpInfo("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits, _bce_logits_samples, FLOATING, error_inputs=_bce_logits_errors, symbol="torch.nn.functional.binary_cross_entropy_with_logits",
           # torch rounds each bf16 step; squall computes in float32 and rounds once
           tolerances={torch.bfloat16: (4e-2, 4e-2)}),
    OpInfo("kl_div", F.kl_div, _kl_samples, FLOATING, error_inputs=_kl_errors, symbol="torch.nn.functional.kl_div"),
]
