"""The KernelBench runner's pure parts (bench/kernelbench/), without torch or
forge: problem selection, sharding, resume, classification, the scale knob,
the end-to-end summary and the table. ctest: bench/kernelbench (unit)."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "kernelbench"))
import classify  # noqa: E402
import forge_report  # noqa: E402
import measure  # noqa: E402
import model_script  # noqa: E402
import problems  # noqa: E402
import project  # noqa: E402
import results  # noqa: E402

NAMES = ["1_Square_matrix_multiplication_.py", "19_ReLU.py", "23_Softmax.py", "2_Standard_matrix_multiplication_.py",
         "40_LayerNorm.py", "47_Sum_reduction_over_a_dimension.py", "100_HingeLoss.py", "README.md"]


def checkout():
    d = tempfile.mkdtemp()
    os.makedirs(os.path.join(d, "KernelBench", "level1"))
    for n in NAMES:
        open(os.path.join(d, "KernelBench", "level1", n), "w").close()
    return d


class Problems(unittest.TestCase):
    def setUp(self):
        self.all = problems.level_files(checkout())

    def test_sorted_by_number_python_files_only(self):
        self.assertEqual([p[0] for p in self.all], [1, 2, 19, 23, 40, 47, 100])
        self.assertEqual(self.all[2][1], "19_ReLU")

    def test_only_numbers_and_name_parts(self):
        self.assertEqual([p[0] for p in problems.pick(self.all, "19, softmax,layernorm")], [19, 23, 40])
        self.assertEqual([p[0] for p in problems.pick(self.all, "1")], [1])  # a number is exact, not a prefix
        self.assertEqual(problems.pick(self.all, ""), self.all)

    def test_shards_partition_round_robin(self):
        shards = [problems.shard(self.all, i, 3) for i in (1, 2, 3)]
        self.assertEqual(sorted(p for s in shards for p in s), self.all)
        self.assertEqual([p[0] for p in shards[0]], [1, 23, 100])
        self.assertEqual(problems.parse_shard("2/5"), (2, 5))
        for bad in ("0/3", "4/3", "x"):
            self.assertRaises(ValueError, problems.parse_shard, bad)

    def test_resume_skips_problems_with_a_line_and_reruns_a_cut_line(self):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write(json.dumps({"kind": "kernelbench", "problem": "level1/19_ReLU"}) + "\n")
        f.write(json.dumps({"kind": "target", "problem": "level1/23_Softmax"}) + "\n")
        f.write('{"kind": "kernelbench", "problem": "level1/40_Lay')  # killed mid-write
        f.close()
        self.assertEqual(problems.done(f.name), {"level1/19_ReLU"})
        self.assertEqual(problems.done("/nonexistent"), set())


class Classes(unittest.TestCase):
    def test_classes(self):
        self.assertEqual(classify.classify(["view", "relu"]), "single-op")
        self.assertEqual(classify.classify(["empty", "_softmax", "view"]), "single-op")
        self.assertEqual(classify.classify(["sigmoid", "mul"]), "chain")
        self.assertEqual(classify.classify(["mul", "mul"]), "chain")  # two kernels, though one op
        self.assertEqual(classify.classify(["t", "addmm", "relu"]), "matmul/conv")
        self.assertEqual(classify.classify(["convolution"]), "matmul/conv")
        self.assertEqual(classify.classify(["_scaled_dot_product_flash_attention"]), "matmul/conv")
        self.assertEqual(classify.classify(["view"]), "no-op")


class Scale(unittest.TestCase):
    def test_shrinks_sizes_keeps_small_ints(self):
        self.assertEqual(model_script.shrink(393216, 0.01), 3072)  # divided by 128, the power of two nearest 100
        self.assertEqual(model_script.shrink(1000, 0.01), 16)  # 128 does not divide it: times 0.01, then 16
        self.assertEqual(model_script.shrink(3000, 0.01), 30)
        # A GroupNorm's channels and groups keep their ratio (times 0.05 gave 409 and 25).
        self.assertEqual((model_script.shrink(8192, 0.05), model_script.shrink(512, 0.05)), (512, 32))
        self.assertEqual(model_script.shrink(100, 0.01), 16)  # never below 16
        self.assertEqual(model_script.shrink(3, 0.01), 3)  # kernel sizes, dims, strides stay
        self.assertEqual(model_script.shrink((4096, 8), 0.5), (2048, 8))
        self.assertIs(model_script.shrink(True, 0.01), True)
        self.assertEqual(model_script.shrink(4096, 1), 4096)
        self.assertEqual(model_script.shrink("x", 0.01), "x")


class Measure(unittest.TestCase):
    def test_stats_median_and_iqr(self):
        s = measure.stats([5, 1, 3, 2, 4])
        self.assertEqual((s["median"], s["spread"], s["n"]), (3, 2, 5))
        self.assertIsNone(measure.stats([]))

    def test_alternates_pairs_and_keeps_the_better_compile_mode(self):
        calls = []

        def run(mode, package):
            calls.append((mode, package))
            ms = {None: 2.0, "default": 1.5, "max": 1.0}[mode] * (0.5 if package else 1)
            return {"ms": [ms] * 3, "bytes": 8, "checksum": 1.0, "mode": mode}

        out = measure.end_to_end(run, "/pkg", 2, ["default", "max"])
        self.assertEqual(calls, [(None, None), (None, "/pkg"), (None, "/pkg"), (None, None),
                                 ("default", None), ("default", "/pkg"), ("max", "/pkg"), ("max", None)])
        self.assertEqual(out["eager"]["ms"]["n"], 6)
        self.assertEqual((out["compile"]["mode"], out["compile+forge"]["ms"]["median"]), ("max", 0.5))

    def test_no_package_runs_no_forge_way_and_keeps_errors(self):
        calls = []

        def run(mode, package):
            calls.append(package)
            return {"error": "rc 1: boom", "mode": mode} if mode else {"ms": [1.0], "bytes": 8, "checksum": 0,
                                                                        "mode": None}

        out = measure.end_to_end(run, None, 1, ["default"])
        self.assertEqual(calls, [None, None])
        self.assertIsNone(out["eager+forge"]["ms"])
        self.assertEqual(out["compile"]["errors"], ["rc 1: boom"])


ENV = {"schema": "forge-bench/1", "kind": "kernelbench", "date": "2026-12-03", "commit": "abc1234", "device": "cpu",
       "driver": None, "torch": "2.x", "cuda": None, "command": "x", "source": None, "notes": None}


def row(shipped):
    return {"target": "19_ReLU/relu", "op": "relu", "shipped": shipped, "candidate_us": {"median": 5, "spread": 1},
            "speedup": {"eager": 1.5, "eager_hot": 1.4, "compile": 1.1}}


class Table(unittest.TestCase):
    def test_line_and_table(self):
        e2e = {w: {"ms": {"median": m, "spread": 0.1, "n": 30}, "mode": None, "checksum": 1.0, "bytes": 2e6}
               for w, m in (("eager", 2.0), ("eager+forge", 1.0), ("compile", 1.6), ("compile+forge", 0.8))}
        x = results.line(ENV, "level1/19_ReLU", "single-op", ["relu"], 1.0, 20, [row(True)], e2e, 4e9, None, {})
        self.assertEqual((x["speedup"]["eager"], x["speedup"]["compile"], x["floor_ms"]), (2.0, 2.0, 0.5))
        self.assertEqual(x["floor_pct"]["eager+forge"], 50)
        self.assertTrue(x["shipped"])
        failed = results.line(ENV, "level1/23_Softmax", "single-op", [], 1.0, 20, [], {}, None,
                              "no_proposer: nearest: rows_vec", {})
        text = results.table([x, failed])
        self.assertIn("19_ReLU", text)
        self.assertIn("relu", text)
        self.assertIn("no_proposer: nearest: rows_vec", text)
        self.assertIn("2 problems, 1 with a shipped kernel", text)
        self.assertEqual(len(text.splitlines()), 4)
        json.dumps(x)  # a results line is JSON

    def test_goals_count_kernels_never_stock(self):
        e2e = {w: {"ms": {"median": m, "spread": 0.1, "n": 30}, "mode": None, "checksum": 1.0, "bytes": 2e9}
               for w, m in (("eager", 2.0), ("eager+forge", 1.0), ("compile", 1.6), ("compile+forge", 0.8))}
        fast = results.line(ENV, "level1/19_ReLU", "single-op", ["relu"], 1.0, 20, [row(True)], e2e, 4e12, None, {})
        fast["speedup"].update(kernel_eager=2.0, kernel_compile=1.5)
        slow = json.loads(json.dumps(fast))
        slow["problem"] = "level1/23_Softmax"
        slow["speedup"].update(kernel_eager=1.2, kernel_compile=0.6)
        none = results.line(ENV, "level1/40_LayerNorm", "single-op", [], 1.0, 20, [], {}, None, "not_faster", {})
        chain = results.line(ENV, "level1/36_RMSNorm_", "chain", [], 1.0, 20, [row(True)], e2e, 4e9, None, {})
        text = results.goals([fast, slow, none, chain])
        self.assertIn("3 run, 2 with a shipped kernel (67%)", text)
        self.assertIn("geometric mean 0.95× over 2 problems", text)  # sqrt(1.5 * 0.6)
        self.assertIn("below 1: 23_Softmax 0.60", text)
        self.assertIn("19_ReLU 50%", text)

    def test_manifest_names_script_budget_device(self):
        text = project.manifest("19_ReLU", "/kb/19_ReLU.py", 0.01, "cpu", 5, 0, 2, 64, 120, build_seconds=216)
        self.assertIn("run: python model.py /kb/19_ReLU.py --scale 0.01 --device cpu", text)
        self.assertIn("budget: {iterations: 5, seconds: 0, build_seconds: 216}", text)
        self.assertIn("device: {backend: cpu}", text)
        self.assertIn("OMP_NUM_THREADS: '1'", text)
        self.assertIn("compile_env: {KB_COMPILE: default}", text)


class Reasons(unittest.TestCase):
    def rows(self, **kw):
        r = {"target": "m/_softmax/1", "selection": "selected", "why": None, "kernel": None, "shipped": False,
             "iterations": 0, "outcomes": {}, "rejections": None}
        r.update(kw)
        return [r]

    def test_forge_words(self):
        self.assertIsNone(forge_report.reason({}, self.rows(kernel="rows_3pass", shipped=True), 0, ""))
        self.assertEqual(forge_report.reason({}, self.rows(selection="no_proposer", why="nearest: x"), 0, ""),
                         "no_proposer: nearest: x")
        stopped = {"interrupted": True, "notes": ["search of m/_softmax/1 failed: the evaluation worker is not built",
                                                  "package: no accepted kernel yet"]}
        self.assertEqual(forge_report.reason(stopped, self.rows(), 130, ""),
                         "interrupted at the time limit; no kernel accepted in 0 iterations: outcomes {}; "
                         "search of m/_softmax/1 failed: the evaluation worker is not built")
        oom = self.rows(iterations=4, outcomes={"rejected": 4}, rejections={"out of memory": 4})
        self.assertIn('rejections {"out of memory": 4}', forge_report.reason({}, oom, 0, ""))
        self.assertIn("capture failed: timeout",
                      forge_report.reason({"models": {"m": {"status": "failed", "reason": "timeout"}}}, [], 1, ""))
        self.assertIn("no report: boom", forge_report.reason(None, [], 2, "boom"))


if __name__ == "__main__":
    unittest.main()
