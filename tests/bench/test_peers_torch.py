"""bench/kernelbench/peers.py on the CPU: each adapter's mapping of a
KernelBench Model onto a peer's API, with torch's own functions standing in
for the peer (Liger and quack need a GPU), checked to match the Model; a
mapping that normalizes the wrong dims does not match and is not timed; a peer
whose package is missing says so. ctest: bench/peers_torch (torch tier; exit 77
= skipped without torch)."""
import os
import sys
import tempfile
import unittest

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIPPED: torch is not importable")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "kernelbench"))
import peers  # noqa: E402

# Small problems in KernelBench's form (Model, get_inputs, get_init_inputs).
PROBLEMS = {
    "40_LayerNorm": """
import torch
class Model(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape=normalized_shape)
        torch.nn.init.normal_(self.ln.weight)
        torch.nn.init.normal_(self.ln.bias)
    def forward(self, x):
        return self.ln(x)
def get_inputs():
    return [torch.randn(4, 3, 5, 6)]
def get_init_inputs():
    return [(3, 5, 6)]
""",
    "35_GroupNorm_": """
import torch
class Model(torch.nn.Module):
    def __init__(self, num_features, num_groups):
        super().__init__()
        self.gn = torch.nn.GroupNorm(num_groups=num_groups, num_channels=num_features)
    def forward(self, x):
        return self.gn(x)
def get_inputs():
    return [torch.randn(2, 8, 4, 4)]
def get_init_inputs():
    return [8, 4]
""",
    "23_Softmax": """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
def get_inputs():
    return [torch.randn(4, 33)]
def get_init_inputs():
    return []
""",
    "95_CrossEntropyLoss": """
import torch
class Model(torch.nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)
def get_inputs():
    return [torch.randn(16, 10), torch.randint(0, 10, (16,))]
def get_init_inputs():
    return []
""",
}


def write(name):
    d = tempfile.mkdtemp()
    path = os.path.join(d, name + ".py")
    with open(path, "w") as f:
        f.write(PROBLEMS[name])
    return path


def torch_group_norm(x, w, b, channels, groups, eps):
    return F.group_norm(x, groups, w, b, eps)


class Adapters(unittest.TestCase):
    def check(self, name, table):
        r = peers.run(write(name), "cpu", 3, 1.0, table)
        self.assertTrue(r["ref"]["matches"], r)
        self.assertEqual(r["ref"]["ms"]["n"], 3)
        return r

    def test_layer_norm_flattens_the_normalized_dims(self):
        self.check("40_LayerNorm", {"ref": peers.layer_norm(lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps))})
        # Normalizing the input's last dim alone is another op: no match, no time.
        wrong = lambda model, inputs: (lambda: F.layer_norm(inputs[0], inputs[0].shape[-1:]))
        r = peers.run(write("40_LayerNorm"), "cpu", 3, 1.0, {"ref": wrong})
        self.assertFalse(r["ref"]["matches"])
        self.assertNotIn("ms", r["ref"])

    def test_group_norm_softmax_cross_entropy(self):
        self.check("35_GroupNorm_", {"ref": peers.group_norm(torch_group_norm)})
        self.check("23_Softmax", {"ref": peers.last_dim_softmax(lambda x: torch.softmax(x, -1))})
        self.check("95_CrossEntropyLoss", {"ref": peers.cross_entropy(F.cross_entropy)})

    def test_the_table_by_problem_name(self):
        self.assertEqual(sorted(peers.adapters("23_Softmax")), ["liger", "quack"])
        self.assertEqual(peers.adapters("24_LogSoftmax"), {})
        self.assertEqual(sorted(peers.adapters("35_GroupNorm_")), ["liger"])
        self.assertEqual(peers.adapters("19_ReLU"), {})

    def test_a_missing_package_is_reported(self):
        import importlib.util
        if importlib.util.find_spec("liger_kernel") is not None:
            self.skipTest("liger_kernel is installed here")
        r = peers.run(write("23_Softmax"), "cpu", 3, 1.0)
        self.assertEqual(r["liger"], {"error": "liger_kernel is not installed here"})


if __name__ == "__main__":
    unittest.main()
