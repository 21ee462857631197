"""A problem's class, decided by capturing: the ATen ops Model.forward calls
(a TorchDispatchMode over meta tensors at the shipped sizes: no memory, no
device, a second per problem), then classify() below.

  matmul/conv  any matrix product or convolution among them (mm, bmm, addmm,
               convolution, attention, ...): compute-bound, cuBLAS/cuDNN's
               ground, whatever runs beside it
  single-op    exactly one compute call (views and allocations aside): one
               memory-bound kernel, where the copy floor says how close it is
  chain        several compute calls and no matmul/conv: what a fused kernel
               (or torch.compile) wins over eager, op by op forge cannot

Names are aten overload packets (`relu`, `_softmax`, `sum`); the lists are
those forge's capture also treats as no kernel (docs/SELECTION.md: view, alloc).
classify() is pure (tests/bench/test_kernelbench.py); capture_ops() needs torch."""

VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "expand_as", "unsqueeze",
         "squeeze", "slice", "select", "as_strided", "alias", "detach", "unbind", "split", "split_with_sizes",
         "chunk", "narrow", "diagonal", "view_as", "flatten", "unflatten", "lift_fresh", "_reshape_alias",
         "movedim", "numpy_T", "mT", "contiguous"}
ALLOCS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_", "zeros", "zeros_like",
          "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange",
          "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "is_same_size"}
PRODUCTS = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "matmul", "linear", "einsum",
            "tensordot", "_addmm_activation", "_int_mm"}


def is_product(op):
    return (op in PRODUCTS or "conv" in op or op.startswith("_scaled_dot_product")
            or op.startswith("_flash_attention") or op.startswith("_efficient_attention"))


def compute_calls(ops):
    """The calls that run a kernel: views and allocations dropped."""
    return [op for op in ops if op not in VIEWS and op not in ALLOCS]


def classify(ops):
    """ops: the forward's aten calls in order (names, repeats kept) -> class."""
    calls = compute_calls(ops)
    if any(is_product(op) for op in calls):
        return "matmul/conv"
    if len(calls) == 1:
        return "single-op"
    if not calls:
        return "no-op"
    return "chain"


def capture_ops(path, scale=1.0):
    """The aten calls of Model.forward on meta tensors (the problem's own sizes
    at SCALE); falls back to the CPU at scale 1/64 where an op has no meta kernel."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from model_script import load_problem

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    def run(device, s):
        mod = load_problem(path, s)
        torch.manual_seed(0)
        with torch.device(device):
            model = mod.Model(*mod.get_init_inputs()).eval()
            inputs = mod.get_inputs()
        rec = Record()
        with torch.no_grad(), rec:
            model(*inputs)
        return rec.ops

    try:
        return run("meta", scale)
    except Exception:  # data-dependent or meta-less ops: a small real run instead
        return run("cpu", min(scale, 1 / 64))
