// A chain of captured ops as one dispatcher op (chain_op.h).
#include "chain_op.h"

#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>

#include "op_spec.h"
#include "runner_protocol.h"

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
  std::vector<int> done;  // earlier ops whose returns no later op reads: freed after this one
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
      for (int j : s.done) outs[static_cast<size_t>(j)].clear();  // intermediates live no longer than needed
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
  // name -> (its definition, the registration)
  static std::map<std::string, std::pair<std::string, std::unique_ptr<torch::Library>>> registered;
  if (!req.contains("op") || !req["op"].is_string()) bad("\"op\" must be a string");
  const std::string qualified = req["op"].get<std::string>();
  const std::string ns = "forge_chain::";
  if (qualified.rfind(ns, 0) != 0 || qualified.size() == ns.size())
    bad("a chain's op is named forge_chain::<name>, not " + qualified);
  const std::string name = qualified.substr(ns.size());
  std::lock_guard<std::mutex> lock(mu);
  const json& def = req["chain"];
  if (auto it = registered.find(name); it != registered.end()) {
    if (it->second.first != def.dump()) bad(qualified + " is registered with another definition");
    return;
  }
  const int inputs = get_int(def, "inputs", "the definition");
  const int outputs = get_int(def, "outputs", "the definition");
  if (inputs < 0 || inputs > runner::kMaxInputs) bad("\"inputs\" must be 0.." + std::to_string(runner::kMaxInputs));
  if (!def.contains("ops") || !def["ops"].is_array() || def["ops"].empty()) bad("\"ops\" must be a non-empty array");
  std::vector<Step> steps;
  std::vector<std::vector<bool>> returns;  // each op's returns: whether each is a tensor
  std::vector<int> last_use;                // each op's returns: the last op that reads them
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
      if (ref && !spec.args[i].schema_tensor) bad(where + ": argument " + spec.args[i].name + " is no tensor");
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
              static_cast<size_t>(src.output) >= returns[static_cast<size_t>(src.index)].size() ||
              !returns[static_cast<size_t>(src.index)][static_cast<size_t>(src.output)])
            bad(where + ": output " + std::to_string(src.output) + " of op " + std::to_string(src.index) +
                " is not an earlier op's tensor return");
          last_use[static_cast<size_t>(src.index)] = static_cast<int>(j);
        }
      } else if (spec.args[i].kind == ArgKind::Tensor) {
        bad(where + ": tensor argument " + spec.args[i].name + " has no \"ref\"");
      } else {
        src.value = scalar_ivalue(spec.args[i]);
      }
      s.args.push_back(std::move(src));
    }
    std::vector<bool> kinds;
    for (const auto& r : spec.op->schema().returns()) kinds.push_back(r.type()->kind() == c10::TypeKind::TensorType);
    returns.push_back(std::move(kinds));
    last_use.push_back(-1);
    steps.push_back(std::move(s));
  }
  for (size_t j = 0; j + 1 < steps.size(); ++j)
    if (last_use[j] >= 0) steps[static_cast<size_t>(last_use[j])].done.push_back(static_cast<int>(j));
    else steps[j].done.push_back(static_cast<int>(j));  // read by no later op
  for (int i = 0; i < inputs; ++i)
    if (!used[static_cast<size_t>(i)]) bad("input " + std::to_string(i) + " is read by no op");
  const std::vector<bool>& last = returns.back();
  if (outputs < 1 || static_cast<size_t>(outputs) > last.size()) bad("\"outputs\" must be 1.." + std::to_string(last.size()));
  for (int k = 0; k < outputs; ++k)
    if (!last[static_cast<size_t>(k)]) bad("the last op's return " + std::to_string(k) + " is no tensor");

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
  registered.emplace(name, std::make_pair(def.dump(), std::move(lib)));
}

}  // namespace forge::worker
