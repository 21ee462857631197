"""What loading forge's package costs a compiled model, step by step: the
problem's Model through model_script.py (KB_COMPILE, KB_TIMES, KB_ITERS as
there) after one of
  none     nothing of forge's
  lib      torch.ops.load_library(PKG/libforge.so) alone
  pass     a no-op Inductor post-grad pass with a uuid (what install() keys the cache with), no library
  install  the library and forge_compile.install() (KB_PACKAGE without forge_modules)
  python3 bench/kernelbench/loaded_probe.py STEP PKG MODEL_SCRIPT PROBLEM [model_script args]
Run each step in its own process, alternating, and compare KB_TIMES' medians."""
import os
import runpy
import sys

step, pkg, script = sys.argv[1], sys.argv[2], sys.argv[3]
import torch  # noqa: E402

if step in ("lib", "install"):
    torch.ops.load_library(os.path.join(pkg, "libforge.so"))
if step == "install":
    sys.path.insert(0, pkg)
    import forge_compile

    print("routed:", forge_compile.install(), file=sys.stderr)
if step == "pass":
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class NoOp(CustomGraphPass):
        def __call__(self, graph):
            pass

        def uuid(self):
            return "loaded-probe"

    config.post_grad_custom_post_pass = NoOp()
os.environ.pop("KB_PACKAGE", None)
sys.argv = [script] + sys.argv[4:]
runpy.run_path(script, run_name="__main__")
