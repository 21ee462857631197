// A chain of captured ops as one dispatcher op (chain_op.h).
#include "chain_op.h"

#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>

#include "op_spec.h"

namespace forge::worker {
namespace {

// Where a chain op's argument comes from.
struct Source {
  enum Kind { Constant, Input, Output } kind = Constant;
  int index = 0;   // Input: the chain's input; Output: the earlier op
  int output = 0;  // Output: which of its returns
  c10::IValue value;
};

struct Step {
  c10::OperatorHandle op;
  std::vector<Source> args;
};

class ChainKernel final : public c10::OperatorKernel {
 public:
  ChainKernel(std::vector<Step> steps, int inputs, int outputs)
      : m_steps(std::move(steps)), m_inputs(inputs), m_outputs(outputs) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::vector<c10::IValue> in(stack->end() - m_inputs, stack->end());
    torch::jit::drop(*stack, m_inputs);
    std::vector<torch::jit::Stack> outs;
    outs.reserve(m_steps.size());
    for (const Step& s : m_steps) {
      torch::jit::Stack st;
      for (const Source& a : s.args) {
        if (a.kind == Source::Input) st.push_back(in[static_cast<size_t>(a.index)]);
        else if (a.kind == Source::Output) st.push_back(outs[static_cast<size_t>(a.index)][static_cast<size_t>(a.output)]);
        else st.push_back(a.value);
      }
      s.op.callBoxed(&st);
      outs.push_back(std::move(st));
    }
    for (int k = 0; k < m_outputs; ++k) stack->push_back(outs.back()[static_cast<size_t>(k)]);
  }

 private:
  std::vector<Step> m_steps;
  int m_inputs, m_outputs;
};

[[noreturn]] void bad(const std::string& what) { throw RequestError("chain: " + what); }

int get_int(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) bad(where + ": \"" + key + "\" must be an integer");
  return j[key].get<int>();
}

}  // namespace

void register_chain(const json& req) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<torch::Library>> registered;
  if (!req.contains("op") || !req["op"].is_string()) bad("\"op\" must be a string");
  const std::string qualified = req["op"].get<std::string>();
  const std::string ns = "forge_chain::";
  if (qualified.rfind(ns, 0) != 0 || qualified.size() == ns.size())
    bad("a chain's op is named forge_chain::<name>, not " + qualified);
  const std::string name = qualified.substr(ns.size());
  std::lock_guard<std::mutex> lock(mu);
  if (registered.count(name)) return;

  const json& def = req["chain"];
  const int inputs = get_int(def, "inputs", "the definition");
  const int outputs = get_int(def, "outputs", "the definition");
  if (!def.contains("ops") || !def["ops"].is_array() || def["ops"].empty()) bad("\"ops\" must be a non-empty array");
  std::vector<Step> steps;
  std::vector<int> returns;  // tensor returns of each op
  std::vector<bool> used(static_cast<size_t>(std::max(inputs, 0)), false);
  const bool cuda = req.value("cuda_available", true);
  for (size_t j = 0; j < def["ops"].size(); ++j) {
    const json& o = def["ops"][j];
    const std::string where = "ops[" + std::to_string(j) + "]";
    // The op and its constant arguments, parsed as a request's are.
    OpSpec spec = parse_op(o, cuda);
    Step s{*spec.op, {}};
    const json& records = o["args"];
    for (size_t i = 0; i < spec.args.size(); ++i) {
      Source src;
      const json* ref = i < records.size() && records[i].is_object() && records[i].contains("ref") ? &records[i]["ref"]
                                                                                                   : nullptr;
      if (ref) {
        if (ref->contains("input")) {
          src.kind = Source::Input;
          src.index = get_int(*ref, "input", where);
          if (src.index < 0 || src.index >= inputs) bad(where + ": input " + std::to_string(src.index) + " out of range");
          used[static_cast<size_t>(src.index)] = true;
        } else {
          src.kind = Source::Output;
          src.index = get_int(*ref, "op", where);
          src.output = get_int(*ref, "output", where);
          if (src.index < 0 || static_cast<size_t>(src.index) >= j || src.output < 0 ||
              src.output >= returns[static_cast<size_t>(src.index)])
            bad(where + ": output " + std::to_string(src.output) + " of op " + std::to_string(src.index) +
                " is not an earlier op's tensor return");
        }
      } else if (spec.args[i].kind == ArgKind::Tensor) {
        bad(where + ": tensor argument " + spec.args[i].name + " has no \"ref\"");
      } else {
        src.value = scalar_ivalue(spec.args[i]);
      }
      s.args.push_back(std::move(src));
    }
    int tensors = 0;
    for (const auto& r : spec.op->schema().returns())
      if (r.type()->kind() == c10::TypeKind::TensorType) ++tensors;
    returns.push_back(tensors);
    steps.push_back(std::move(s));
  }
  for (int i = 0; i < inputs; ++i)
    if (!used[static_cast<size_t>(i)]) bad("input " + std::to_string(i) + " is read by no op");
  if (outputs < 1 || outputs > returns.back()) bad("\"outputs\" must be 1.." + std::to_string(returns.back()));

  std::string schema = name + "(";
  for (int i = 0; i < inputs; ++i) schema += (i ? ", Tensor i" : "Tensor i") + std::to_string(i);
  schema += ") -> ";
  if (outputs == 1) {
    schema += "Tensor";
  } else {
    schema += "(";
    for (int k = 0; k < outputs; ++k) schema += k ? ", Tensor" : "Tensor";
    schema += ")";
  }
  auto lib = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "forge_chain", std::nullopt, __FILE__,
                                              static_cast<uint32_t>(__LINE__));
  lib->def(schema.c_str());
  lib->impl(name.c_str(), torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                          torch::CppFunction::makeFromBoxedFunctor(
                                              std::make_unique<ChainKernel>(std::move(steps), inputs, outputs))));
  registered.emplace(name, std::move(lib));
}

}  // namespace forge::worker
