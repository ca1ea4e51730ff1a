"""OpInfos for gather/scatter/index ops, masked_fill, embedding and one_hot."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, FLOATING, NUMERIC, Directive, ErrorInput, OpInfo, SampleInput, make_tensor
from squall.ltorch.unmodelled import NotModelled


def _idx(shape, high, device="cpu", dtype=torch.int64):
    return make_tensor(shape, dtype, device, low=0, high=max(high, 1))


def _t(shape, dtype, device="cpu", **kw):
    return make_tensor(shape, dtype, device, **kw)


# --- gathers ------------------------------------------------------------------------------


def _index_select_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((3,), 5)))
    yield SampleInput((_t((5, 4), dtype, device), -1, _idx((6,), 4)))
    yield SampleInput((_t((5, 4), dtype, device, noncontiguous=True), 1, _idx((2,), 4, dtype=torch.int32)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((), 5)))
    yield SampleInput((_t((), dtype, device), 0, _idx((1,), 1)))
    yield SampleInput((_t((), dtype, device), -1, _idx((), 1)))
    yield SampleInput((_t((5, 0, 2), dtype, device), 2, _idx((4,), 2)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((0,), 5)))


def _index_select_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, 0, torch.tensor([1.0]))), RuntimeError, "Expected dtype int32 or int64 for index")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([[1]]))), IndexError, "Index is supposed to be a vector")
    yield ErrorInput(SampleInput((x, 2, torch.tensor([1]))), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput((torch.tensor(2.0), 0, torch.tensor([0, 0]))), RuntimeError, "Index to scalar can have only 1 value")


def _gather_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((3, 4), 5)))
    yield SampleInput((_t((5, 4), dtype, device), 1, _idx((5, 7), 4)))
    yield SampleInput((_t((5, 4, 3), dtype, device, noncontiguous=True), -1, _idx((2, 3, 6), 3)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((2, 2), 4, dtype=torch.int32)), {"sparse_grad": False})
    yield SampleInput((_t((), dtype, device), 0, _idx((), 1)))
    yield SampleInput((_t((), dtype, device), 0, _idx((3,), 1)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((0, 7), 5)))
    yield SampleInput((_t((5, 0), dtype, device), 0, _idx((2, 0), 5)))


def _gather_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, 0, torch.tensor([[1.0]]))), RuntimeError, "Expected dtype int32/int64 for index")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([1]))), RuntimeError, "same number of dimensions as input")
    yield ErrorInput(SampleInput((x, 0, torch.zeros(1, 5, dtype=torch.long))), RuntimeError, "Size does not match at dimension 1")
    yield ErrorInput(SampleInput((x, -3, torch.zeros(1, 1, dtype=torch.long))), IndexError, "Dimension out of range")


def _take_along_dim_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), _idx((5, 2), 4), 1))
    yield SampleInput((_t((5, 4), dtype, device), _idx((3, 1), 5), 0))
    yield SampleInput((_t((1, 4), dtype, device), _idx((3, 6), 4), -1))
    yield SampleInput((_t((5, 4), dtype, device, noncontiguous=True), _idx((7,), 20)))
    yield SampleInput((_t((5, 4), dtype, device), _idx((2, 3), 20)), {"dim": None})


def _take_along_dim_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((torch.tensor(1.0), torch.tensor(0), 0)), IndexError, "tensor has no dimensions")
    yield ErrorInput(SampleInput((x, torch.tensor([1]), 1)), RuntimeError, "should have the same number of dimensions")
    yield ErrorInput(SampleInput((x, torch.tensor([[1.0]]), 1)), RuntimeError, "dtype of indices should be Long but got Float")
    yield ErrorInput(SampleInput((x, torch.ones(2, 2, dtype=torch.long), 1)), RuntimeError, "must match the size")


def _take_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), _idx((3, 2), 20)))
    yield SampleInput((_t((5, 4), dtype, device, noncontiguous=True), _idx((7,), 20)))
    yield SampleInput((_t((), dtype, device), _idx((2,), 1)))
    yield SampleInput((_t((3,), dtype, device), _idx((), 3)))
    yield SampleInput((_t((3,), dtype, device), _idx((0, 2), 3)))


def _take_errors(device):
    yield ErrorInput(SampleInput((_t((3, 4), torch.float32, device), torch.tensor([1], dtype=torch.int32))), RuntimeError, "Expected a long tensor for index, but got Int")


# --- scatters ---------------------------------------------------------------------------


def _scatter_samples(value_forms: bool):
    def samples(dtype, device):
        yield SampleInput((_t((5, 4), dtype, device), 0, _idx((3, 4), 5), _t((3, 4), dtype, device)))
        yield SampleInput((_t((5, 4), dtype, device), 1, _idx((5, 2), 4, dtype=torch.int32), _t((6, 3), dtype, device)))
        yield SampleInput((_t((5, 4, 3), dtype, device, noncontiguous=True), -1, _idx((2, 3, 6), 3), _t((2, 3, 6), dtype, device)))
        yield SampleInput((_t((), dtype, device), 0, _idx((), 1), _t((), dtype, device)))
        yield SampleInput((_t((5, 4), dtype, device), 0, _idx((0, 4), 5), _t((3, 4), dtype, device)))
        if value_forms:
            yield SampleInput((_t((5, 4), dtype, device), 1, _idx((5, 2), 4), 1))
            yield SampleInput((_t((5, 4), dtype, device), 1, _idx((5, 2), 4)), {"value": 0})
            yield SampleInput((_t((5, 4), dtype, device), 0, _idx((2, 4), 5)), {"src": _t((3, 4), dtype, device)})

    return samples


def _scatter_errors(name):
    def errors(device):
        x = _t((3, 4), torch.float32, device)
        yield ErrorInput(SampleInput((x, 0, torch.zeros(2, 2), x)), RuntimeError, "Expected dtype int32/int64 for index")
        yield ErrorInput(SampleInput((x, 0, torch.zeros(2, 2, dtype=torch.long), x.double())), RuntimeError, "Expected self.dtype to be equal to src.dtype")
        yield ErrorInput(SampleInput((x, 0, torch.zeros(2, dtype=torch.long), x)), RuntimeError, "same number of dimensions as self")
        yield ErrorInput(SampleInput((x, 0, torch.zeros(4, 5, dtype=torch.long), x)), RuntimeError, r"Expected index \[4, 5\] to be no larger than self")
        yield ErrorInput(SampleInput((x, 0, torch.zeros(2, 2, dtype=torch.long), x[:1, :1])), RuntimeError, "no larger size than src")

    return errors


def _scatter_reduce_samples(dtype, device):
    for reduce in ("sum", "mean", "prod", "amax", "amin"):
        for include_self in (True, False):
            yield SampleInput((_t((5, 4), dtype, device), 0, _idx((6, 4), 5), _t((6, 4), dtype, device), reduce), {"include_self": include_self})
    yield SampleInput((_t((5, 4), dtype, device), 1, _idx((5, 2), 4), _t((6, 3), dtype, device), "mean"))
    yield SampleInput((_t((), dtype, device), 0, _idx((), 1), _t((), dtype, device), "sum"))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((0, 4), 5), _t((3, 4), dtype, device), "amax"))
    yield SampleInput((_t((5, 4), dtype, device), -1, _idx((5, 3), 4), _t((5, 3), dtype, device), "max"), {"include_self": False})


def _scatter_reduce_errors(device):
    x = _t((3, 4), torch.float32, device)
    idx = torch.zeros(2, 2, dtype=torch.long)
    yield ErrorInput(SampleInput((x, 0, idx, x, "foo")), RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin")
    yield ErrorInput(SampleInput((x, 0, idx, x.double(), "sum")), RuntimeError, "Expected self.dtype to be equal to src.dtype")


# --- index_* --------------------------------------------------------------------------


def _index_add_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((3,), 5), _t((3, 4), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), -1, _idx((6,), 4), _t((5, 6), dtype, device, noncontiguous=True)))
    yield SampleInput((_t((5, 4), dtype, device), 1, _idx((2,), 4, dtype=torch.int32), _t((5, 2), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((), 5), _t((1, 4), dtype, device)))
    yield SampleInput((_t((), dtype, device), 0, _idx((), 1), _t((), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((0,), 5), _t((0, 4), dtype, device)))
    if dtype != torch.bool:
        yield SampleInput((_t((5, 4), dtype, device), 0, _idx((3,), 5), _t((3, 4), dtype, device)), {"alpha": 2})


def _index_add_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1]), torch.ones(3, 4))), RuntimeError, r"Number of indices \(2\) should be equal to source.size\(dim\)")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1]), torch.ones(2, 5))), RuntimeError, "source tensor shape must match self tensor shape")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1]), torch.ones(2, 4, dtype=torch.float64))), RuntimeError, r"self \(Float\) and source \(Double\) must have the same scalar type")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([[0, 1]]), torch.ones(2, 4))), IndexError, "Index is supposed to be a vector")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0.0, 1.0]), torch.ones(2, 4))), RuntimeError, "Expected dtype int32/int64 for index")


def _index_copy_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), 0, torch.tensor([4, 0, 2]), _t((3, 4), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), -1, torch.tensor([3, 1]), _t((5, 2), dtype, device, noncontiguous=True)))
    yield SampleInput((_t((5, 4), dtype, device), 0, torch.tensor(2), _t((1, 4), dtype, device)))
    yield SampleInput((_t((), dtype, device), 0, torch.tensor(0), _t((), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((0,), 5), _t((0, 4), dtype, device)))


def _index_copy_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1]), torch.ones(3, 4))), IndexError, r"Number of indices \(2\) should be equal to source.size\(dim\) \(3\)")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1]), torch.ones(2, 5))), RuntimeError, "must have same slice shapes")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1]), torch.ones(2, 4, dtype=torch.float64))), RuntimeError, r"\(self\) Float and \(source\) Double")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([[0, 1]]), torch.ones(2, 4))), IndexError, r"Index should have dimension 1 or 0 \(got 2\)")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1], dtype=torch.int32), torch.ones(2, 4))), RuntimeError, "Expected a long tensor for index, but got Int")
    yield ErrorInput(SampleInput((x, 0, torch.tensor(1), torch.ones(4))), IndexError, "their dimensionality must match")


def _index_fill_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), 0, _idx((3,), 5), 1))
    yield SampleInput((_t((5, 4), dtype, device, noncontiguous=True), -1, _idx((2,), 4), True))
    yield SampleInput((_t((5, 4), dtype, device), 1, _idx((), 4), _t((), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), 1, _idx((2,), 4), _t((), torch.float64, device)))
    yield SampleInput((_t((), dtype, device), 0, _idx((), 1), 0))
    yield SampleInput((_t((5, 0), dtype, device), 0, _idx((2,), 5), 0))


def _index_fill_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, 0, torch.tensor([[0, 1]]), 2.0)), RuntimeError, "Index has to be a vector/scalar")
    yield ErrorInput(SampleInput((x, 0, torch.tensor([0, 1], dtype=torch.int32), 2.0)), IndexError, "Expected dtype int64 for index")
    yield ErrorInput(SampleInput((x, 0, torch.tensor(1), torch.tensor([2.0]))), RuntimeError, "only supports a 0-dimensional value tensor")


def _index_put_samples(dtype, device):
    yield SampleInput((_t((5, 4), dtype, device), (torch.tensor([4, 0, 2]),), _t((3, 4), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), (torch.tensor([4, 0, 2]), torch.tensor([1, 3, 0])), _t((), dtype, device)))
    yield SampleInput((_t((5, 4, 3), dtype, device, noncontiguous=True), (torch.tensor([[1], [2]]), torch.tensor([0, 3])), _t((2, 2, 3), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), [torch.tensor([1, 2], dtype=torch.int32)], _t((4,), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), (torch.tensor([1, 1, 2]),), _t((3, 4), dtype, device), True))
    yield SampleInput((_t((5, 4), dtype, device), (torch.tensor([0, 0]), torch.tensor([3, 3])), _t((2,), dtype, device)), {"accumulate": True})
    yield SampleInput((_t((5, 4), dtype, device), (_idx((0,), 5),), _t((0, 4), dtype, device)))


def _index_put_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, (torch.tensor([0, 1]),), torch.tensor(1.0, dtype=torch.float64))), RuntimeError, "Index put requires the source and destination dtypes match")
    yield ErrorInput(SampleInput((x, (torch.tensor([0, 1.0]),), torch.tensor(1.0))), IndexError, "tensors used as indices must be long")
    yield ErrorInput(SampleInput((x, (torch.tensor([0]), torch.tensor([1]), torch.tensor([1])), torch.tensor(1.0))), IndexError, "too many indices")
    yield ErrorInput(SampleInput((x, (torch.tensor([0, 1]),), torch.ones(3))), RuntimeError, r"shape mismatch: value tensor of shape \[3\]")
    yield ErrorInput(SampleInput((x, (torch.tensor([0, 1]), torch.tensor([0, 1, 2])), torch.tensor(1.0))), IndexError, "shape mismatch|must match|broadcast", torch_raises=True)


def _masked_fill_samples(dtype, device):
    mask = lambda shape: make_tensor(shape, torch.bool, device)
    yield SampleInput((_t((5, 4), dtype, device), mask((5, 4)), 1))
    yield SampleInput((_t((5, 4), dtype, device, noncontiguous=True), mask((4,)), True))
    yield SampleInput((_t((5, 4), dtype, device), mask((5, 1)), _t((), dtype, device)))
    yield SampleInput((_t((5, 4), dtype, device), mask((5, 4)), _t((), torch.float64, device)))
    yield SampleInput((_t((), dtype, device), mask((2, 3)), 0))
    yield SampleInput((_t((5, 0), dtype, device), mask((5, 0)), 0))
    yield SampleInput((_t((5, 4), dtype, device), mask((5, 4))), {"value": 2})


def _masked_fill_errors(device):
    x = _t((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x, torch.ones(3, 4), 2.0)), RuntimeError, "only supports boolean masks")
    yield ErrorInput(SampleInput((x, torch.ones(3, 4, dtype=torch.bool), torch.tensor([2.0]))), RuntimeError, "only supports a 0-dimensional value tensor")
    yield ErrorInput(SampleInput((x, torch.ones(3, 5, dtype=torch.bool), 2.0)), RuntimeError, "must match the size")


def _embedding_samples(dtype, device):
    w = _t((10, 3), dtype, device)
    yield SampleInput((_idx((4,), 10), w))
    yield SampleInput((_idx((2, 5), 10), w))
    yield SampleInput((_idx((2, 5), 10, dtype=torch.int32), _t((10, 3), dtype, device, noncontiguous=True)))
    yield SampleInput((_idx((), 10), w))
    yield SampleInput((_idx((0, 2), 10), w))
    yield SampleInput((_idx((3,), 10), w), {"padding_idx": 0})
    yield SampleInput((_idx((3,), 10), w, -1))


def _embedding_errors(device):
    w = _t((3, 2), torch.float32, device)
    yield ErrorInput(SampleInput((torch.tensor([1, 2]), torch.ones(3))), RuntimeError, "'weight' must be 2-D")
    yield ErrorInput(SampleInput((torch.tensor([1.0, 2.0]), w)), RuntimeError, "to have one of the following scalar types: Long, Int")
    yield ErrorInput(SampleInput((torch.tensor([1, 2]), w), {"padding_idx": 3}), AssertionError, "Padding_idx must be within num_embeddings")
    yield ErrorInput(SampleInput((torch.tensor([1, 2]), w), {"max_norm": 1.0}), NotModelled, "max_norm")


def _one_hot_samples(dtype, device):
    yield SampleInput((_idx((5,), 4), 4))
    yield SampleInput((_idx((2, 3), 4), 6))
    yield SampleInput((_idx((), 3), 3))
    yield SampleInput((_idx((0,), 3),), {"num_classes": 3})


def _one_hot_inferred_samples(dtype, device):
    # num_classes read from the data of the call being compiled, and guarded
    yield SampleInput((_idx((5,), 4),))
    yield SampleInput((_idx((2, 3), 7),))


def _one_hot_errors(device):
    yield ErrorInput(SampleInput((torch.tensor([1, 2], dtype=torch.int32), 4)), RuntimeError, "only applicable to index tensor of type LongTensor")


# --- in-place forms: the op runs on a clone so the sample's input stays intact ---------


def _inplace(name):
    return lambda x, *args, **kwargs: getattr(x.clone(), name)(*args, **kwargs)


NO_BOOL = (torch.float32, torch.float64, torch.bfloat16, torch.int64)

opinfos = [
    OpInfo("index_select", torch.index_select, _index_select_samples, ALL_TYPES, _index_select_errors, symbol="torch.index_select"),
    OpInfo("gather", torch.gather, _gather_samples, ALL_TYPES, _gather_errors, symbol="torch.gather"),
    OpInfo("take_along_dim", torch.take_along_dim, _take_along_dim_samples, ALL_TYPES, _take_along_dim_errors, symbol="torch.take_along_dim"),
    OpInfo("take", torch.take, _take_samples, ALL_TYPES, _take_errors, symbol="torch.take"),
    OpInfo("scatter", torch.scatter, _scatter_samples(True), ALL_TYPES, _scatter_errors("scatter"), symbol="torch.scatter"),
    OpInfo("scatter_reduce_add", lambda a, d, i, s: torch.scatter(a, d, i, s, reduce="add"), _scatter_samples(False), NO_BOOL, symbol="torch.scatter"),
    OpInfo("scatter_reduce_multiply", lambda a, d, i, s: torch.scatter(a, d, i, s, reduce="multiply"), _scatter_samples(False), NO_BOOL, symbol="torch.scatter"),
    OpInfo("scatter_add", torch.scatter_add, _scatter_samples(False), NO_BOOL, _scatter_errors("scatter_add"), symbol="torch.scatter_add"),
    OpInfo("scatter_reduce", torch.scatter_reduce, _scatter_reduce_samples, NO_BOOL, _scatter_reduce_errors, symbol="torch.scatter_reduce"),
    OpInfo("index_add", torch.index_add, _index_add_samples, ALL_TYPES, _index_add_errors, symbol="torch.index_add"),
    OpInfo("index_copy", torch.index_copy, _index_copy_samples, ALL_TYPES, _index_copy_errors, symbol="torch.index_copy"),
    OpInfo("index_fill", torch.index_fill, _index_fill_samples, ALL_TYPES, _index_fill_errors, symbol="torch.index_fill"),
    OpInfo("index_put", torch.index_put, _index_put_samples, ALL_TYPES, _index_put_errors, symbol="torch.index_put"),
    OpInfo("masked_fill", torch.masked_fill, _masked_fill_samples, ALL_TYPES, _masked_fill_errors, symbol="torch.masked_fill"),
    OpInfo("embedding", torch.nn.functional.embedding, _embedding_samples, FLOATING + (torch.int64,), _embedding_errors, symbol="torch.nn.functional.embedding"),
    OpInfo("one_hot", torch.nn.functional.one_hot, _one_hot_samples, (torch.int64,), _one_hot_errors, symbol="torch.nn.functional.one_hot"),
    OpInfo(
        "one_hot_inferred",
        torch.nn.functional.one_hot,
        _one_hot_inferred_samples,
        (torch.int64,),
        symbol="torch.nn.functional.one_hot",
        directives=(Directive("its output shape depends on data: it runs whole as its torch call, guarded, never as prims", configs=("decomposed",)),),
    ),
    # in-place methods
    OpInfo("Tensor.index_put_", _inplace("index_put_"), _index_put_samples, NUMERIC),
    OpInfo("Tensor.index_add_", _inplace("index_add_"), _index_add_samples, NUMERIC),
    OpInfo("Tensor.index_copy_", _inplace("index_copy_"), _index_copy_samples, NUMERIC),
    OpInfo("Tensor.index_fill_", _inplace("index_fill_"), _index_fill_samples, NUMERIC),
    OpInfo("Tensor.scatter_", _inplace("scatter_"), _scatter_samples(True), NUMERIC),
    OpInfo("Tensor.scatter_add_", _inplace("scatter_add_"), _scatter_samples(False), NUMERIC),
    OpInfo("Tensor.masked_fill_", _inplace("masked_fill_"), lambda d, dev: (s for s in _masked_fill_samples(d, dev) if s.args[0].ndim), NUMERIC),
]


def _inplace_mutates_input(x, mask):
    # the in-place op changes the caller's tensor, and returns it
    y = x.masked_fill_(mask, 0)
    return y, x


opinfos.append(
    OpInfo(
        "Tensor.masked_fill_caller_tensor",
        _inplace_mutates_input,
        lambda dtype, device: [SampleInput((make_tensor((3, 4), dtype, device), make_tensor((3, 4), torch.bool, device)))],
        NUMERIC,
        reference=lambda x, m: _inplace_mutates_input(x.clone(), m),
    )
)
