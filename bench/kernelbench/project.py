"""A problem's tiny forge project, in a work dir outside the repository:
model.py (model_script.py, copied) and forge.yaml naming it, the budget and
the device. The store is the project's own .forge/."""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))


def manifest(name, problem, scale, device, budget, seconds, top, max_input_mb, capture_timeout, build_seconds=0):
    """forge.yaml's text (forge.yaml.example has every field). One intra-op
    thread on the CPU: forge's CPU kernels are single-threaded (docs/PACKAGE.md).
    compile_env: the build's end-to-end check also times the model compiled
    (model_script.py's KB_COMPILE) with forge's routes off and on, and turns
    routes off that made it slower. KB_ITERS: the check compares each process's
    median over its own calls; on a 2-core CPU level 2's 76 at scale 0.05
    compiled gave 0.39-0.55 ms per process with 5 calls, 0.34-0.40 with 20."""
    env = "KB_ITERS: '20'" + (", OMP_NUM_THREADS: '1'" if device == "cpu" else "")
    return (f"# KernelBench {os.path.basename(problem)} at scale {scale:g}, written by bench/kernelbench/run.py\n"
            "models:\n"
            f"  {name}:\n"
            f"    run: python model.py {problem} --scale {scale:g} --device {device}\n"
            f"    env: {{{env}}}\n"
            "    latency: '([0-9.]+) ms/iter'\n"
            "    check_runs: 3\n"
            "    compile_env: {KB_COMPILE: default}\n"
            f"targets: {{top: {top}, min_share: 0.01}}\n"
            f"budget: {{iterations: {budget}, seconds: {seconds}, build_seconds: {build_seconds}}}\n"
            f"device: {{backend: {device}}}\n"
            f"capture: {{samples_per_target: 1, max_input_mb_per_model: {max_input_mb}, "
            f"timeout_seconds: {capture_timeout}}}\n"
            "proposer: {strategies: true}\n")


def write(workdir, name, problem, scale, device, budget, seconds=0, top=4, max_input_mb=8192, capture_timeout=300,
          build_seconds=0):
    """The project folder for one problem; an existing one is kept (its store
    continues the search) but its files are written again."""
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "model_script.py"), os.path.join(d, "model.py"))
    with open(os.path.join(d, "forge.yaml"), "w") as f:
        f.write(manifest(name, os.path.abspath(problem), scale, device, budget, seconds, top, max_input_mb,
                         capture_timeout, build_seconds))
    return d
