// forge_run_torchscript MODEL.pt INPUTS.pt [--runs N]
//
// Runs a TorchScript model (torch.jit.save) on inputs saved from Python with
// torch.save([t1, t2, ...], INPUTS.pt) (a list or tuple of positional inputs,
// or a single tensor), under torch::NoGradGuard. It links libforge_capture, so
// with FORGE_CAPTURE_DIR set the run is recorded like a Python program.
//
// The TensorExpr fuser is disabled (and the legacy CPU/GPU fusers overridden
// off) so that the recorder sees the model's individual ATen ops, not fused
// groups. Exit status: 0 ok, 2 usage, 1 any error.
#ifndef NDEBUG
#error "build with -DNDEBUG (see docs/CAPTURE.md)"
#endif

#include <torch/csrc/jit/codegen/fuser/interface.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/script.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<c10::IValue> to_inputs(const c10::IValue& v) {
  std::vector<c10::IValue> out;
  if (v.isTuple()) {
    for (const auto& x : v.toTupleRef().elements()) out.push_back(x);
  } else if (v.isList()) {
    auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i) out.push_back(l.get(i));
  } else {
    out.push_back(v);
  }
  return out;
}

void describe(std::ostream& os, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    os << "tensor " << t.scalar_type() << t.sizes() << " on " << t.device();
  } else if (v.isTuple()) {
    os << "tuple(";
    bool first = true;
    for (const auto& x : v.toTupleRef().elements()) {
      if (!first) os << ", ";
      first = false;
      describe(os, x);
    }
    os << ")";
  } else {
    os << v.tagKind();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, inputs_path;
  int runs = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (model.empty()) {
      model = a;
    } else if (inputs_path.empty()) {
      inputs_path = a;
    } else {
      model.clear();
      break;
    }
  }
  if (model.empty() || inputs_path.empty() || runs < 1) {
    std::fprintf(stderr, "usage: forge_run_torchscript MODEL.pt INPUTS.pt [--runs N]\n");
    return 2;
  }
  try {
    torch::jit::setTensorExprFuserEnabled(false);
    torch::jit::overrideCanFuseOnCPU(false);
    torch::jit::overrideCanFuseOnGPU(false);
    torch::jit::Module m = torch::jit::load(model);
    m.eval();
    std::vector<c10::IValue> inputs = to_inputs(torch::jit::pickle_load(read_file(inputs_path)));
    torch::NoGradGuard no_grad;
    c10::IValue out;
    for (int r = 0; r < runs; ++r) out = m.forward(inputs);
    std::cout << "forge_run_torchscript: " << runs << " run(s), " << inputs.size()
              << " input(s), output ";
    describe(std::cout, out);
    std::cout << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge_run_torchscript: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
