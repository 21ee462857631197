#include "rules/search/chain_strategies.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "rules/capture/chains.h"
#include "rules/evaluate/family.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The pointwise table's ops (targets/_common/pointwise_ops.h) by ATen name and
// overload; binary ones take (self, other[, alpha]).
struct TableOp {
  const char* code;
  bool binary;
};
const std::map<std::string, TableOp>& table() {
  static const std::map<std::string, TableOp> t = {
      {"relu", {"PW_relu", false}},         {"leaky_relu", {"PW_leaky_relu", false}},
      {"gelu", {"PW_gelu", false}},         {"silu", {"PW_silu", false}},
      {"sigmoid", {"PW_sigmoid", false}},   {"tanh", {"PW_tanh", false}},
      {"softplus", {"PW_softplus", false}}, {"elu", {"PW_elu", false}},
      {"hardtanh", {"PW_hardtanh", false}}, {"hardsigmoid", {"PW_hardsigmoid", false}},
      {"hardswish", {"PW_hardswish", false}}, {"mish", {"PW_mish", false}},
      {"clamp", {"PW_clamp", false}},       {"pow.Tensor_Scalar", {"PW_pow", false}},
      {"abs", {"PW_abs", false}},           {"neg", {"PW_neg", false}},
      {"exp", {"PW_exp", false}},           {"sqrt", {"PW_sqrt", false}},
      {"rsqrt", {"PW_rsqrt", false}},       {"add.Tensor", {"PW_add", true}},
      {"sub.Tensor", {"PW_sub", true}},     {"mul.Tensor", {"PW_mul", true}},
      {"div.Tensor", {"PW_div", true}},     {"maximum", {"PW_maximum", true}},
      {"minimum", {"PW_minimum", true}},
  };
  return t;
}

bool is_tensor(const json& a) { return a.is_object() && a.value("type", "") == "Tensor"; }

const char* storage(const std::string& dtype) {
  if (dtype == "float32") return "CHAIN_F32";
  if (dtype == "bfloat16") return "CHAIN_BF16";
  if (dtype == "float16") return "CHAIN_F16";
  return nullptr;
}
const char* abi_dtype(const std::string& dtype) {
  if (dtype == "float32") return "FORGE_FLOAT32";
  if (dtype == "bfloat16") return "FORGE_BFLOAT16";
  if (dtype == "float16") return "FORGE_FLOAT16";
  return nullptr;
}

std::vector<int64_t> sizes_of(const json& t) { return t.value("sizes", std::vector<int64_t>{}); }

int64_t product(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < v.size() && i < to; ++i) p *= v[i];
  return p;
}

bool contiguous(const json& t) {
  const auto sizes = sizes_of(t);
  const auto strides = t.value("strides", std::vector<int64_t>{});
  if (sizes.size() != strides.size()) return false;
  int64_t expect = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

// A C++ double literal of v (the kernels convert to float as pointwise_parse.h does).
std::string number(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::string("static_cast<float>(") + buf + ")";
}

// The value of argument i of an op (a number, a bool, None), or the default.
std::optional<double> scalar_arg(const json& args, size_t i, std::optional<double> fallback) {
  if (i >= args.size()) return fallback;
  const json& v = args[i].value("value", json());
  if (args[i].value("type", "") == "None" || v.is_null()) return std::nullopt;
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return fallback;
}

// A check that tensor k of call->`list` has exactly `sizes`.
std::string sizes_check(size_t k, const char* list, const std::vector<int64_t>& sizes) {
  std::string want = "{";
  for (size_t d = 0; d < sizes.size(); ++d) want += (d ? ", " : "") + std::to_string(sizes[d]);
  want += sizes.empty() ? "0}" : "}";  // a zero-length array is no C++
  return "  {\n    static const int64_t want[] = " + want + ";\n    if (!chain_sizes_are(call->" + list + "[" +
         std::to_string(k) + "], want, " + std::to_string(sizes.size()) + ")) return false;\n  }\n";
}

// The chain's ops from `first` on as lines of a chain_body / chain_epilogue
// (each `const V tJ = pw_op_...(operands, scalars);`), or "" with *why: an op
// outside the pointwise table, an out= or in-place one, a scalar the table
// cannot take. `epilogue`: every operand is an earlier op's result (the
// template's own output is t0), none a chain input.
// A chain tensor as the generated code names it: input k is in[k], op j's result tJ.
std::string operand(const json& ref) {
  return ref.contains("input") ? "in[" + std::to_string(ref.value("input", 0)) + "]" : "t" + std::to_string(ref.value("op", 0));
}

// The dtype of op j's result: as a later op reads it, or `last` (the chain's
// output's) for the last op; "" where no op reads it.
std::string result_dtype(const json& ops, size_t j, const std::string& last) {
  if (j + 1 == ops.size()) return last;
  for (size_t k = j + 1; k < ops.size(); ++k)
    for (const auto& a : ops[k].value("args", json::array())) {
      const json ref = is_tensor(a) ? a.value("ref", json()) : json();
      if (ref.is_object() && !ref.contains("input") && ref.value("op", -1) == static_cast<int>(j) &&
          ref.value("output", 0) == 0)
        return a.value("dtype", "");
    }
  return "";
}

// `expr` rounded to a 16-bit result's precision, as the stock op stores it:
// the chain computes in fp32, so each op of a bf16 chain rounds where stock does.
std::string rounded(const std::string& expr, const std::string& dtype) {
  if (dtype == "bfloat16") return "pw_round_bf16(" + expr + ")";
  if (dtype == "float16") return "pw_round_f16(" + expr + ")";
  return expr;
}

// A batch norm's positions: (input, weight, bias, running_mean, running_var,
// training, eps) in its schema, or nullopt for another op.
struct BatchNormArgs {
  int training;  // -1: the op has none (always eval)
  int eps;
};
std::optional<BatchNormArgs> batch_norm_args(const std::string& name) {
  if (name == "native_batch_norm" || name == "cudnn_batch_norm") return BatchNormArgs{5, 7};
  if (name == "_native_batch_norm_legit_no_training") return BatchNormArgs{-1, 6};
  return std::nullopt;
}

// Op j's line when it is a batch norm in eval mode (a chain's head: its
// weight, bias and running statistics are chain inputs read per channel,
// chain_inputs' read_as), "" with *why when it cannot be, nullopt for any other op.
std::optional<std::string> batch_norm_line(const std::string& name, const json& args, size_t j,
                                           const std::string& where, std::string* why, const std::string& last,
                                           const json& ops) {
  const auto pos = batch_norm_args(name);
  if (!pos) return std::nullopt;
  if (args.size() <= static_cast<size_t>(pos->eps)) return *why = where + " has too few arguments", std::string();
  if (pos->training >= 0 && scalar_arg(args, static_cast<size_t>(pos->training), std::nullopt) != 0.0)
    return *why = where + " is in training mode (it updates the running statistics)", std::string();
  const auto eps = scalar_arg(args, static_cast<size_t>(pos->eps), std::nullopt);
  if (!eps) return *why = where + "'s eps is not a number", std::string();
  std::string v[5];
  const char* fallback[5] = {nullptr, "pw_k(1.0f)", "pw_k(0.0f)", nullptr, nullptr};
  for (size_t k = 0; k < 5; ++k) {
    const json& a = args[k];
    if (!is_tensor(a)) {
      if (!fallback[k]) return *why = where + " has no running statistics", std::string();
      v[k] = fallback[k];
      continue;
    }
    const json ref = a.value("ref", json());
    if (k > 0 && !ref.contains("input"))
      return *why = where + "'s parameters or statistics are computed by the chain", std::string();
    if (!ref.contains("input") && ref.value("output", 0) != 0) return *why = where + " reads an op's second output", std::string();
    v[k] = operand(ref);
  }
  return "  const V t" + std::to_string(j) + " = " +
         rounded("pw_batch_norm_eval(" + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3] + ", " + v[4] +
                     ", static_cast<float>(" + number(*eps) + "))",
                 result_dtype(ops, j, last)) +
         ";  // " + name + ", eval mode\n";
}

// Which ops of a chain pointwise_body writes, and how.
struct BodySpan {
  size_t first = 0;          // the first op written
  size_t stop = SIZE_MAX;    // the ops before it only
  size_t given = SIZE_MAX;   // that op's line is `tJ = r`, a value the template computed (a reduction's)
  bool epilogue = false;     // a template's epilogue: reads no tensor from outside the chain
  bool batch_norms = false;  // batch norms in eval mode may be ops (parameters read per channel, chain_definition's)
};

// The chain's ops as lines `const V tJ = ...;`; "" and `why` where an op is
// not in the table. `last`: the chain output's dtype.
std::string pointwise_body(const json& ops, const BodySpan& span, const std::string& last, std::string* why) {
  const size_t first = span.first, stop = span.stop, given = span.given;
  const bool epilogue = span.epilogue, batch_norms = span.batch_norms;
  std::string body;
  for (size_t j = first; j < ops.size() && j < stop; ++j) {
    const json& op = ops[j];
    std::string name = op.value("op", "");
    if (name.rfind("aten::", 0) == 0) name = name.substr(6);
    const std::string overload = op.value("overload", "");
    const std::string full = name + (overload.empty() ? "" : "." + overload);
    const std::string where = "op " + std::to_string(j) + " (" + full + ")";
    if (j == given) {
      body += "  const V t" + std::to_string(j) + " = " + rounded("r", result_dtype(ops, j, last)) + ";  // " + full +
              ", computed by the template\n";
      continue;
    }
    if (overload == "out" || (overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0))
      return *why = where + " writes into an out= buffer, which the chain takes as an input it changes", "";
    const json& args = op.value("args", json::array());
    // A definition spells in-place ops as their functional ops (rules/capture/chain_target.cpp).
    if (functional_spelling(full) != full) return *why = where + " is an in-place op", "";
    if (const auto bn = batch_norm_line(name, args, j, where, why, last, ops); bn) {
      // Its parameters are read per channel (per_channel_inputs), which only
      // chain_definition arranges.
      if (!batch_norms) return *why = where + " is a batch norm, which only the fused pointwise template takes", "";
      if (bn->empty()) return "";
      body += *bn;
      continue;
    }
    auto it = table().find(full);
    if (it == table().end() && full != "_to_copy") return *why = where + " is not in the pointwise table", "";
    std::vector<std::string> operands;
    for (const auto& a : args) {
      if (!is_tensor(a)) continue;
      const json& ref = a.value("ref", json());
      if (ref.contains("input") && epilogue)
        return *why = where + " reads a tensor from outside the chain, which a template's epilogue cannot", "";
      if (!ref.contains("input") && ref.value("output", 0) != 0) return *why = where + " reads an op's second output", "";
      operands.push_back(operand(ref));
    }
    if (full == "_to_copy") {
      // A cast: the chain computes in fp32, so one to a 16-bit type rounds there.
      const std::string to = args.size() == 2 ? args[1].value("value", "") : "";
      const char* round = to == "float32" ? "" : to == "bfloat16" ? "pw_round_bf16" : to == "float16" ? "pw_round_f16" : nullptr;
      if (!round || operands.size() != 1) return *why = where + " casts to " + (to.empty() ? "an unknown type" : to), "";
      body += "  const V t" + std::to_string(j) + " = " + round + "(" + operands[0] + ");  // _to_copy to " + to + "\n";
      continue;
    }
    const bool binary = it->second.binary;
    if (operands.size() != (binary ? 2u : 1u)) return *why = where + " takes " + std::to_string(operands.size()) + " tensors", "";
    // PwScalars {s0, s1, s2, has_lo, has_hi, tanh_approx} as pointwise_parse.h fills them.
    double s[3] = {0, 0, 0};
    int has_lo = 0, has_hi = 0, tanh_approx = 0;
    auto need = [&](size_t i, double fallback, double* into) {
      auto v = scalar_arg(args, i, fallback);
      if (!v) return false;
      *into = *v;
      return true;
    };
    const std::string code = it->second.code;
    bool ok = true;
    if (code == "PW_leaky_relu") ok = need(1, 0.01, &s[0]);
    else if (code == "PW_softplus") ok = need(1, 1, &s[0]) && need(2, 20, &s[1]) && s[0] != 0;
    else if (code == "PW_elu") ok = need(1, 1, &s[0]) && need(2, 1, &s[1]) && need(3, 1, &s[2]);
    else if (code == "PW_hardtanh") ok = need(1, -1, &s[0]) && need(2, 1, &s[1]);
    else if (code == "PW_add" || code == "PW_sub") ok = need(2, 1, &s[0]);
    else if (code == "PW_pow") {
      ok = need(1, 0, &s[0]);
      const double e = s[0];
      if (ok && !(e == 2 || e == 3 || e == 1 || e == -1 || e == -2 || e == 0.5 || e == -0.5))
        return *why = where + ": exponent " + std::to_string(e) + " is not one the table computes", "";
    } else if (code == "PW_clamp") {
      auto lo = scalar_arg(args, 1, std::nullopt), hi = scalar_arg(args, 2, std::nullopt);
      has_lo = lo.has_value(), has_hi = hi.has_value();
      s[0] = lo.value_or(0), s[1] = hi.value_or(0);
    } else if (code == "PW_gelu") {
      const std::string mode = args.size() > 1 ? args[1].value("value", "none") : "none";
      if (mode != "none" && mode != "tanh") return *why = where + ": approximate '" + mode + "'", "";
      tanh_approx = mode == "tanh";
    }
    if (!ok) return *why = where + ": a scalar argument the table needs is missing", "";
    const std::string scalars = "PwScalars{" + number(s[0]) + ", " + number(s[1]) + ", " + number(s[2]) + ", " +
                                std::to_string(has_lo) + ", " + std::to_string(has_hi) + ", " +
                                std::to_string(tanh_approx) + "}";
    const std::string value = std::string(binary ? "pw_op_binary<" : "pw_op_unary<") + code + ">(" + operands[0] +
                              (binary ? ", " + operands[1] : "") + ", " + scalars + ")";
    body += "  const V t" + std::to_string(j) + " = " + rounded(value, result_dtype(ops, j, last)) + ";  // " + full + "\n";
  }
  return body;
}

}  // namespace

namespace {

// The chain's inputs for a template of the output's shape: CHAIN_INPUT_LIST's
// entries (how each input is read at output element j) and the checks of every
// tensor's exact sizes; false with *why for an input no template reads.
bool chain_inputs(const Target& t, std::string* list, std::string* shapes, std::string* why,
                  const std::map<size_t, std::vector<int64_t>>& read_as = {}) {
  const json& out = t.outputs[0];
  const std::vector<int64_t> out_sizes = sizes_of(out);
  const int64_t numel = product(out_sizes);
  *shapes = sizes_check(0, "outputs", out_sizes);
  for (size_t k = 0; k < t.args.size(); ++k) {
    const json& a = t.args[k];
    const std::string dtype = a.value("dtype", "");
    const std::vector<int64_t> real_sizes = sizes_of(a);
    const auto as = read_as.find(k);
    const std::vector<int64_t> sizes = as == read_as.end() ? real_sizes : as->second;
    const std::string where = "input " + std::to_string(k) + " (" + a.value("name", "") + ")";
    std::string entry;
    auto add = [&](const char* type, const char* dt, const char* mode, int64_t inner, int64_t n, int64_t inner2 = 1,
                   int64_t n2 = 1) {
      entry = std::string(" X(") + std::to_string(k) + ", " + type + ", " + dt + ", " + mode + ", " +
              std::to_string(inner) + ", " + std::to_string(n) + ", " + std::to_string(inner2) + ", " +
              std::to_string(n2) + ")";
    };
    if (!is_tensor(a)) return *why = where + " is not a tensor", false;
    const bool host_scalar = product(sizes) == 1 && a.value("device", "cpu") == "cpu";
    if ((dtype == "float64" || dtype == "int64") && host_scalar) {
      // A Python number (x * 0.5, x / 2), read on the host.
      add("CHAIN_F32", dtype == "float64" ? "FORGE_FLOAT64" : "FORGE_INT64", "CHAIN_VALUE", 1, 1);
    } else if (dtype == "float32" && host_scalar && out.value("device", "cpu") != "cpu") {
      // A CPU 0-dim tensor beside device tensors (torch.min(x, torch.tensor(c))):
      // the kernel cannot read host memory, so it is read on the host too.
      add("CHAIN_F32", "FORGE_FLOAT32", "CHAIN_VALUE", 1, 1);
    } else if (!storage(dtype)) {
      return *why = where + " is " + dtype + " (the fused kernels read float32, bfloat16, float16)", false;
    } else if (!contiguous(a)) {
      return *why = where + " is not contiguous", false;
    } else if (sizes == out_sizes) {
      add(storage(dtype), abi_dtype(dtype), "CHAIN_FULL", 1, numel);
    } else {
      // Broadcast: sizes align from the right; the dims where the input is not
      // 1 must be at most two runs [lo, hi) of the output's dims, where they
      // match them (a mask of [batch, 1, q, k] for [batch, heads, q, k]). A
      // dim of size 1 in both continues a run.
      if (sizes.size() > out_sizes.size()) return *why = where + " has more dims than the output", false;
      const size_t off = out_sizes.size() - sizes.size();
      std::vector<std::pair<size_t, size_t>> runs;
      bool open = false;
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d] == 1) {
          open = open && out_sizes[off + d] == 1;
          continue;
        }
        if (sizes[d] != out_sizes[off + d]) return *why = where + " does not broadcast to the output", false;
        if (open) runs.back().second = off + d + 1;
        else runs.push_back({off + d, off + d + 1});
        open = true;
      }
      if (runs.size() > 2) return *why = where + " broadcasts along more than two runs of dims", false;
      const size_t end = out_sizes.size();
      const auto inner = runs.empty() ? std::make_pair(end, end) : runs.back();  // empty: one element
      const auto outer = runs.size() == 2 ? runs.front() : std::make_pair(end, end);
      add(storage(dtype), abi_dtype(dtype), "CHAIN_BCAST", product(out_sizes, inner.second),
          product(out_sizes, inner.first, inner.second), product(out_sizes, outer.second),
          product(out_sizes, outer.first, outer.second));
    }
    *list += entry;
    if (dtype != "float64" && dtype != "int64") *shapes += sizes_check(k, "inputs", real_sizes);
  }
  return true;
}

// The definition's common part: the inputs, the output, its size.
std::string chain_header(const Target& t, const std::string& list) {
  const std::string out_dtype = t.outputs[0].value("dtype", "");
  return "#define CHAIN_INPUTS " + std::to_string(t.args.size()) + "\n" +  //
         "#define CHAIN_Y " + storage(out_dtype) + "\n" +                   //
         "#define CHAIN_Y_DTYPE " + abi_dtype(out_dtype) + "\n" +           //
         "constexpr int64_t kChainNumel = " + std::to_string(product(sizes_of(t.outputs[0]))) + ";\n" +
         "// X(input, storage type, forge dtype, CHAIN_FULL | CHAIN_BCAST | CHAIN_VALUE, inner, n, inner2, n2)\n" +
         "#define CHAIN_INPUT_LIST(X)" + list + "\n";
}

std::string shapes_function(const std::string& shapes) {
  return "// The sizes generated for (chain_checks.h checks numel, dtype and layout):\n"
         "// another shape of as many elements would index the broadcasts wrongly.\n"
         "inline bool chain_shapes_ok(const forge_call* call) {\n" + shapes + "  return true;\n}\n";
}

// The one output a fused template writes, or "" with *why.
bool output_ok(const Target& t, std::string* why) {
  if (t.outputs.size() != 1 || !is_tensor(t.outputs[0])) return *why = "the chain returns more than one tensor", false;
  const std::string out_dtype = t.outputs[0].value("dtype", "");
  if (!storage(out_dtype)) return *why = "its output is " + out_dtype + " (the fused kernels write float32, bfloat16, float16)", false;
  if (!contiguous(t.outputs[0])) return *why = "its output is not contiguous", false;
  return true;
}

}  // namespace

namespace {

// The chain inputs a norm reads per channel (a batch norm's weight, bias and
// running statistics, a group norm's weight and bias: [C] of an [N, C, ...]
// output), as chain_inputs reads them:
// [C, 1, ...], which broadcasts along dim 1. false with *why when such an
// input has another size or another op reads it too.
bool per_channel_inputs(const Target& t, const json& ops, std::map<size_t, std::vector<int64_t>>* read_as,
                        std::string* why) {
  const std::vector<int64_t> out = sizes_of(t.outputs[0]);
  std::map<size_t, int> channel_reads, reads;
  for (const auto& op : ops) {
    std::string name = op.value("op", "");
    if (name.rfind("aten::", 0) == 0) name = name.substr(6);
    // A batch norm's weight, bias and running statistics; a group norm's weight and bias.
    const size_t last_param = batch_norm_args(name) ? 4 : name == "native_group_norm" ? 2 : 0;
    const json args = op.value("args", json::array());
    if (last_param && (args.empty() || sizes_of(args[0]) != out))
      return *why = "a norm's input is not of the chain output's size", false;
    for (size_t i = 0; i < args.size(); ++i) {
      const json ref = is_tensor(args[i]) ? args[i].value("ref", json()) : json();
      if (!ref.is_object() || !ref.contains("input")) continue;
      const size_t k = ref.value("input", size_t{0});
      ++reads[k];
      if (i >= 1 && i <= last_param) ++channel_reads[k];
    }
  }
  for (const auto& [k, n] : channel_reads) {
    if (reads[k] != n) return *why = "input " + std::to_string(k) + " is a norm's parameter and read elementwise too", false;
    const std::vector<int64_t> sizes = k < t.args.size() ? sizes_of(t.args[k]) : std::vector<int64_t>{};
    if (out.size() < 2 || sizes != std::vector<int64_t>{out[1]})
      return *why = "input " + std::to_string(k) + " (a norm's parameter) is not one value per channel", false;
    std::vector<int64_t> as(out.size() - 1, 1);
    as[0] = out[1];
    (*read_as)[k] = as;
  }
  return true;
}

}  // namespace

std::string chain_definition(const Target& t, std::string* why) {
  if (!t.chain.is_object()) return *why = "not a chain", "";
  const json ops = t.chain.value("ops", json::array());
  if (ops.empty()) return *why = "not a chain", "";
  std::string list, shapes, text;
  std::map<size_t, std::vector<int64_t>> read_as;
  if (!output_ok(t, why) || !per_channel_inputs(t, ops, &read_as, why) || !chain_inputs(t, &list, &shapes, why, read_as))
    return "";
  std::string body = pointwise_body(ops, {.batch_norms = true}, t.outputs[0].value("dtype", ""), why);
  if (body.empty()) return "";
  text += "// The chain, generated by forge from the target (rules/search/chain_strategies.cpp).\n";
  text += chain_header(t, list);
  text += "template <class V>\nPW_FN V chain_body(const V* in) {\n" + body + "  return t" +
          std::to_string(ops.size() - 1) + ";\n}\n";
  return text + shapes_function(shapes);
}

std::string reduce_definition(const Target& t, std::string* why) {
  const json ops = t.chain.is_object() ? t.chain.value("ops", json::array()) : json::array();
  // The reductions a template computes over one dim: sum, mean, the 2-norm,
  // the max, and (softmax, log_softmax) the row ops made of a max and a sum.
  size_t at = SIZE_MAX;
  std::string kind;
  for (size_t j = 0; j < ops.size(); ++j) {
    const std::string op = ops[j].value("op", "") + "." + ops[j].value("overload", "");
    const std::string k = op == "aten::sum.dim_IntList"         ? "sum"
                          : op == "aten::mean.dim"              ? "mean"
                          : op == "aten::linalg_vector_norm."   ? "norm"
                          : op == "aten::norm.ScalarOpt_dim"    ? "norm"
                          : op == "aten::amax."                 ? "max"
                          : op == "aten::_softmax."             ? "softmax"
                          : op == "aten::_log_softmax."         ? "log_softmax"
                                                                : "";
    if (k.empty()) continue;
    if (at != SIZE_MAX) return *why = "two reductions", "";
    at = j, kind = k;
  }
  if (at == SIZE_MAX) return *why = "no reduction", "";
  const std::string where = "op " + std::to_string(at) + " (" + ops[at].value("op", "").substr(6) + ")";
  if (!output_ok(t, why)) return "";
  const std::vector<int64_t> out_sizes = sizes_of(t.outputs[0]);
  const json args = ops[at].value("args", json::array());
  // (self, dim, keepdim, dtype) for sum and mean, (self, dim, keepdim) for
  // amax; (self, ord|p, dim, keepdim, dtype) for the norms; (self, dim,
  // half_to_float) for the softmaxes, whose result has the input's shape.
  const bool norm = kind == "norm", row_op = kind == "softmax" || kind == "log_softmax";
  const size_t dim_at = norm ? 2 : 1;
  if (args.size() <= dim_at + 1 || !is_tensor(args[0])) return *why = where + ": not dim and keepdim given", "";
  if (norm && args[1].value("type", "") != "None" && scalar_arg(args, 1, 2.0) != 2.0)
    return *why = where + ": not the 2-norm", "";
  for (size_t i = dim_at + 2; i < args.size(); ++i)
    if (args[i].value("type", "") != "None") return *why = where + ": a dtype", "";
  if (!row_op && scalar_arg(args, dim_at + 1, std::nullopt) != 1.0) return *why = where + ": keepdim is not True", "";
  json dims = args[dim_at].value("value", json());
  if (row_op && dims.is_number_integer()) dims = json::array({dims});
  if (!dims.is_array() || dims.size() != 1) return *why = where + ": not over one dim", "";
  int64_t d = dims[0].is_object() ? dims[0].value("value", int64_t{0}) : dims[0].get<int64_t>();
  const int64_t rank = static_cast<int64_t>(out_sizes.size());
  if (d < 0) d += rank;
  if (d < 0 || d >= rank || sizes_of(args[0]) != out_sizes)
    return *why = where + " does not reduce a tensor of the output's shape", "";
  const json ref = args[0].value("ref", json::object());
  if (!ref.is_object() || (!ref.contains("input") && !ref.contains("op"))) return *why = where + " reads no chain tensor", "";
  if (ref.value("output", 0) != 0) return *why = where + " reduces an op's second output", "";
  const std::string reduced = operand(ref);
  std::string list, shapes;
  if (!chain_inputs(t, &list, &shapes, why)) return "";
  std::string pre_why;
  const std::string last = t.outputs[0].value("dtype", "");
  const std::string pre = pointwise_body(ops, {.stop = at}, last, &pre_why);
  if (!pre_why.empty()) return *why = pre_why, "";
  const std::string out = pointwise_body(ops, {.given = at}, last, why);
  if (out.empty()) return "";
  const size_t ud = static_cast<size_t>(d);
  std::string text = "// The chain, generated by forge from the target (rules/search/chain_strategies.cpp):\n"
                     "// a reduction over one dim inside pointwise ops.\n";
  text += chain_header(t, list);
  const char* red_kind = kind == "max" ? "1" : kind == "softmax" ? "2" : kind == "log_softmax" ? "3" : "0";
  text += "#define CHAIN_RED_KIND " + std::string(red_kind) + "  // 0 a sum, 1 a max, 2 softmax, 3 log_softmax\n";
  text += "constexpr int64_t kRedOuter = " + std::to_string(product(out_sizes, 0, ud)) +
          ", kRedN = " + std::to_string(out_sizes[ud]) + ", kRedInner = " + std::to_string(product(out_sizes, ud + 1)) + ";\n";
  text += "// What is reduced at element j (the template reduces it over kRedN).\n";
  text += "template <class V>\nPW_FN V chain_pre(const V* in) {\n" + pre + "  const V v = " + reduced + ";\n  return " +
          (norm ? "v * v" : "v") + ";\n}\n";
  text += "template <class V>\nPW_FN V chain_finish(V acc) {\n  return " +
          std::string(kind == "mean" ? "acc / pw_k(static_cast<float>(kRedN))" : norm ? "pw_sqrt(acc)" : "acc") + ";\n}\n";
  text += row_op ? "// Every op at element j, the softmax's result r there given.\n"
                 : "// Every op at element j, the reduction's result r given.\n";
  text += "template <class V>\nPW_FN V chain_out(const V* in, V r) {\n" + out + "  return t" +
          std::to_string(ops.size() - 1) + ";\n}\n";
  return text + shapes_function(shapes);
}

namespace {

// A native_group_norm's N, C, HxW, groups and eps (its arguments 3-7) as the
// templates' CHAIN_GN_* defines, or "" with *why when one is not a number.
std::string group_norm_defines(const json& args, const std::string& where, std::string* why) {
  std::optional<double> c[5];
  for (int k = 0; k < 5; ++k)
    if (!(c[k] = scalar_arg(args, static_cast<size_t>(3 + k), std::nullopt)))
      return *why = where + "'s sizes or eps are not numbers", "";
  auto integer = [](double v) { return std::to_string(static_cast<long long>(v)) + "LL"; };
  return "#define CHAIN_GN_N " + integer(*c[0]) + "\n#define CHAIN_GN_C " + integer(*c[1]) + "\n#define CHAIN_GN_HW " +
         integer(*c[2]) + "\n#define CHAIN_GN_G " + integer(*c[3]) + "\n#define CHAIN_GN_EPS static_cast<float>(" +
         number(*c[4]) + ")\n";
}

// A native_layer_norm's rows as a one-group norm's CHAIN_GN_* defines:
// N the rows, C the normalized_shape's product (the output's trailing dims),
// HxW 1; or "" with *why when the shape or eps is not as that needs.
std::string layer_norm_defines(const json& args, const std::vector<int64_t>& out, const std::string& where,
                               std::string* why) {
  const json shape = args[1].value("value", json());
  if (!shape.is_array() || shape.empty() || shape.size() > out.size())
    return *why = where + "'s normalized_shape is not a list of the output's trailing sizes", "";
  int64_t row = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    const json& v = shape[k].is_object() ? shape[k].value("value", json()) : shape[k];
    if (!v.is_number_integer() || v.get<int64_t>() != out[out.size() - shape.size() + k])
      return *why = where + "'s normalized_shape is not the output's trailing sizes", "";
    row *= v.get<int64_t>();
  }
  const auto eps = scalar_arg(args, 4, std::nullopt);
  if (!eps) return *why = where + "'s eps is not a number", "";
  if (row <= 0) return *why = where + " normalizes empty rows", "";
  return "#define CHAIN_GN_N " + std::to_string(product(out) / row) + "LL\n#define CHAIN_GN_C " + std::to_string(row) +
         "LL\n#define CHAIN_GN_HW 1LL\n#define CHAIN_GN_G 1LL\n#define CHAIN_GN_EPS static_cast<float>(" +
         number(*eps) + ")\n";
}

}  // namespace

std::string norm_definition(const Target& t, std::string* why) {
  const json ops = t.chain.is_object() ? t.chain.value("ops", json::array()) : json::array();
  size_t g = ops.size();
  for (size_t j = 0; j < ops.size(); ++j) {
    const std::string op = ops[j].value("op", "");
    if (op == "aten::native_group_norm" || op == "aten::native_layer_norm") {
      if (g != ops.size()) return *why = "more than one group or layer norm", "";
      g = j;
    }
  }
  if (g == ops.size()) return *why = "no group or layer norm", "";
  // native_group_norm(input, weight, bias, N, C, HxW, group, eps), or
  // native_layer_norm(input, normalized_shape, weight, bias, eps): a group
  // norm of one group whose channels are the row (N = rows, C = the
  // normalized_shape's product, HxW = 1), its weight and bias [*normalized_shape]
  // read as they broadcast against the output. The input is the op before's
  // result (a chain input when the norm comes first: the head templates'
  // epilogue reads no other tensor, this finish does), weight and bias chain
  // inputs (or none).
  const bool layer = ops[g].value("op", "") == "aten::native_layer_norm";
  const json& args = ops[g].value("args", json::array());
  const std::string where = "op " + std::to_string(g) + (layer ? " (native_layer_norm)" : " (native_group_norm)");
  if (args.size() != (layer ? 5u : 8u)) return *why = where + " has " + std::to_string(args.size()) + " arguments", "";
  const json in_ref = is_tensor(args[0]) ? args[0].value("ref", json()) : json();
  if (g == 0 ? !in_ref.contains("input") : in_ref != json{{"op", g - 1}, {"output", 0}})
    return *why = where + (g == 0 ? " reads no input of the chain" : " does not read the op before it"), "";
  const size_t first_param = layer ? 2 : 1;
  int param[2] = {-1, -1};
  for (size_t k = 0; k < 2; ++k) {
    if (!is_tensor(args[first_param + k])) continue;
    const json ref = args[first_param + k].value("ref", json());
    if (!ref.contains("input")) return *why = where + "'s weight or bias is computed by the chain", "";
    param[k] = ref.value("input", 0);
  }
  if (!output_ok(t, why)) return "";
  // Every op's result is of the output's size: the kernel indexes all of them by output element.
  const std::vector<int64_t> out = sizes_of(t.outputs[0]);
  if (sizes_of(args[0]) != out) return *why = "the norm's input is not of the chain output's size", "";
  const std::string defines = layer ? layer_norm_defines(args, out, where, why) : group_norm_defines(args, where, why);
  if (defines.empty()) return "";
  if (!layer && product(out) != *scalar_arg(args, 3, 0) * *scalar_arg(args, 4, 0) * *scalar_arg(args, 5, 0))
    return *why = where + "'s N*C*HxW is not the output's size", "";
  for (const auto& op : ops)
    for (const auto& a : op.value("args", json::array())) {
      const json ref = is_tensor(a) ? a.value("ref", json()) : json();
      if (ref.is_object() && ref.contains("op") && sizes_of(a) != out)
        return *why = "an op's result is not of the chain output's size", "";
    }
  std::string list, shapes;
  std::map<size_t, std::vector<int64_t>> read_as;
  if (!per_channel_inputs(t, ops, &read_as, why) || !chain_inputs(t, &list, &shapes, why, read_as)) return "";
  const std::string last = t.outputs[0].value("dtype", "");
  const std::string prologue = g == 0 ? "" : pointwise_body(ops, {.stop = g, .batch_norms = true}, last, why);
  if (g > 0 && prologue.empty()) return "";
  std::string finish = pointwise_body(ops, {.first = g, .given = g}, last, why);
  if (finish.empty()) return "";
  std::string text = "// The chain, generated by forge from the target (rules/search/chain_strategies.cpp):\n"
                     "// its ops before the group norm as the prologue, the norm, the rest as the finish.\n";
  text += chain_header(t, list) + defines;
  text += "#define CHAIN_GN_W " + std::to_string(param[0]) + "  // the weight's input (-1: none)\n" +
          "#define CHAIN_GN_B " + std::to_string(param[1]) + "  // the bias's input (-1: none)\n";
  text += "template <class V>\nPW_FN V chain_prologue(const V* in) {\n" + prologue + "  return " +
          (g == 0 ? operand(in_ref) : "t" + std::to_string(g - 1)) + ";\n}\n";
  text += "template <class V>\nPW_FN V chain_finish(const V* in, V r) {\n  (void)in;\n" + finish + "  return t" +
          std::to_string(ops.size() - 1) + ";\n}\n";
  return text + shapes_function(shapes);
}

std::string head_definition(const Target& t, std::string* why) {
  const json ops = t.chain.is_object() ? t.chain.value("ops", json::array()) : json::array();
  if (ops.size() < 2 || ops[0].value("op", "") != "aten::native_group_norm") return *why = "no norm heads it", "";
  // native_group_norm(input, weight, bias, N, C, HxW, group, eps): the chain's
  // inputs 0, 1, 2 (a template's kernel takes exactly these), constants after.
  const json& args = ops[0].value("args", json::array());
  if (args.size() != 8) return *why = "op 0 (native_group_norm) has " + std::to_string(args.size()) + " arguments", "";
  for (int k = 0; k < 3; ++k)
    if (!is_tensor(args[k]) || args[k].value("ref", json()) != json{{"input", k}})
      return *why = std::string("its group norm's ") + (k == 0 ? "input" : k == 1 ? "weight" : "bias") +
                    " is not the chain's input " + std::to_string(k) + " (a group norm without affine parameters?)",
             "";
  if (t.args.size() != 3) return *why = "a later op reads a tensor from outside the chain", "";
  const std::string defines = group_norm_defines(args, "op 0 (native_group_norm)", why);
  if (defines.empty()) return "";
  if (t.outputs.size() != 1 || !storage(t.outputs[0].value("dtype", ""))) return *why = "its output is not one float tensor", "";
  if (!storage(t.args[0].value("dtype", ""))) return *why = "its input is not float32, bfloat16 or float16", "";
  const std::string last = t.outputs[0].value("dtype", "");
  const std::string body = pointwise_body(ops, {.first = 1, .epilogue = true}, last, why);
  if (body.empty()) return "";
  // The norm's own result, rounded as stock stores it before the next op reads it.
  const std::string norm_dtype = result_dtype(ops, 0, last);
  std::string text = "// The chain, generated by forge from the target (rules/search/chain_strategies.cpp):\n"
                     "// the template's op, then the rest as its epilogue (chain_epilogue.h).\n"
                     "#define FORGE_CHAIN_HEAD 1\n" +
                     defines;
  text += "template <class V>\nPW_FN V chain_epilogue(V norm) {\n  const V t0 = " + rounded("norm", norm_dtype) + ";\n" +
          body + "  return t" +
          std::to_string(ops.size() - 1) + ";\n}\n";
  return text;
}

namespace {

bool is_op(const json& op, const char* name, const char* overload) {
  return op.value("op", "") == std::string("aten::") + name && op.value("overload", "") == overload;
}
bool refs(const json& a, const char* kind, int index) {
  const json ref = a.is_object() ? a.value("ref", json()) : json();
  return ref.is_object() && ref.value(kind, -1) == index && (std::string(kind) == "input" || ref.value("output", 0) == 0);
}

}  // namespace

std::string rms_definition(const Target& t, int64_t* row, std::string* why) {
  const json ops = t.chain.is_object() ? t.chain.value("ops", json::array()) : json::array();
  const bool shape = ops.size() == 6 && is_op(ops[0], "pow", "Tensor_Scalar") && is_op(ops[1], "mean", "dim") &&
                     is_op(ops[2], "add", "Tensor") && is_op(ops[3], "rsqrt", "") && is_op(ops[4], "mul", "Tensor") &&
                     is_op(ops[5], "mul", "Tensor");
  if (!shape) return *why = "not an RMSNorm spelled as ops (pow, mean, add, rsqrt, mul, mul)", "";
  auto args = [&](size_t j) { return ops[j].value("args", json::array()); };
  if (t.args.size() != 3)
    return *why = "its ops are an RMSNorm's, but on " + std::to_string(t.args.size()) +
                  " inputs, not x (read twice), eps and a weight", "";
  const json& x = t.args[0];
  const std::vector<int64_t> xs = sizes_of(x);
  if (xs.empty() || !storage(x.value("dtype", "")) || !contiguous(x))
    return *why = "its input is not a contiguous float32, bfloat16 or float16 tensor", "";
  const int64_t n = xs.back();
  const json a0 = args(0), a1 = args(1), a2 = args(2), a3 = args(3), a4 = args(4), a5 = args(5);
  const json dims = a1.size() > 1 ? a1[1].value("value", json()) : json();
  std::vector<int64_t> dim;
  if (dims.is_array())
    for (const auto& d : dims) dim.push_back(d.is_object() ? d.value("value", int64_t{0}) : d.get<int64_t>());
  const bool last_dim = dim.size() == 1 && (dim[0] == -1 || dim[0] == static_cast<int64_t>(xs.size()) - 1);
  const json& eps = t.args[1];
  const bool ok =
      a0.size() == 2 && refs(a0[0], "input", 0) && scalar_arg(a0, 1, std::nullopt) == 2.0 &&  //
      a1.size() >= 3 && refs(a1[0], "op", 0) && last_dim && scalar_arg(a1, 2, std::nullopt) == 1.0 &&
      (a1.size() < 4 || a1[3].value("type", "") == "None") &&  //
      a2.size() == 3 && refs(a2[0], "op", 1) && refs(a2[1], "input", 1) && scalar_arg(a2, 2, 1.0) == 1.0 &&
      (eps.value("dtype", "") == "float64" || eps.value("dtype", "") == "int64") && sizes_of(eps).empty() &&  //
      a3.size() == 1 && refs(a3[0], "op", 2) &&                                                            //
      a4.size() == 2 && ((refs(a4[0], "input", 0) && refs(a4[1], "op", 3)) || (refs(a4[1], "input", 0) && refs(a4[0], "op", 3))) &&
      a5.size() == 2 && ((refs(a5[0], "input", 2) && refs(a5[1], "op", 4)) || (refs(a5[1], "input", 2) && refs(a5[0], "op", 4)));
  if (!ok)
    return *why = "its ops are an RMSNorm's, but not on one x (read twice), x^2 over the last dim, a Python eps "
                  "and a weight", "";
  if (sizes_of(t.args[2]) != std::vector<int64_t>{n} || !storage(t.args[2].value("dtype", "")) ||
      t.outputs.size() != 1 || sizes_of(t.outputs[0]) != xs || t.outputs[0].value("dtype", "") != x.value("dtype", ""))
    return *why = "its RMSNorm's tensors are not x, a weight of the row's length and an output like x", "";
  *row = n;
  return "// The chain, generated by forge from the target (rules/search/chain_strategies.cpp):\n"
         "// an RMSNorm spelled as ops, computed by the rms_norm template.\n"
         "#define FORGE_CHAIN_RMS 1\n#define CHAIN_RMS_N " + std::to_string(n) + "LL\n";
}

namespace {

const std::string kMarker = "// FORGE_CHAIN (forge replaces this line with the generated chain)";

// targets/chain's templates of one strategy, a CPU and a CUDA file, each with
// the chain's definition where its FORGE_CHAIN line stands.
struct ChainTemplate {
  const char* backend;
  const char* file;
  json params;
};
std::vector<Strategy> chain_templates(const std::string& name, const std::string& note, const std::string& definition,
                                      const std::vector<ChainTemplate>& files) {
  std::vector<Strategy> out;
  for (const auto& f : files) {
    Strategy s;
    s.name = name;
    s.backend = f.backend;
    s.source = default_targets_dir() / "chain" / f.file;
    s.params = f.params;
    s.note = note;
    s.text = load_template(s.source);
    const size_t at = s.text.find(kMarker);
    if (at == std::string::npos) throw std::runtime_error(s.source.string() + " has no FORGE_CHAIN line");
    s.text.replace(at, kMarker.size(), definition);
    out.push_back(std::move(s));
  }
  return out;
}

// A chain computed by an op family's templates (a norm head, an RMSNorm): the
// family's templates that have a FORGE_CHAIN line, with the chain's
// definition there; "$row" params are the chain's row.
std::vector<Strategy> family_strategies(const std::string& op, const std::string& prefix,
                                        const std::string& definition, int64_t row) {
  std::vector<Strategy> out;
  const auto families = load_families(default_targets_dir());
  auto family = find_family(families, op);
  if (!family) return out;
  for (Strategy s : load_strategies(*family)) {
    const size_t at = s.text.find(kMarker);
    if (at == std::string::npos) continue;
    const json rows = s.applies.value("row", json());  // a template written for rows of at most so many elements
    if (row > 0 && rows.is_array() && rows.size() == 2 && (row < rows[0].get<int64_t>() || row > rows[1].get<int64_t>()))
      continue;
    s.text.replace(at, kMarker.size(), definition);
    s.name = prefix + s.name;
    s.note = "the " + prefix.substr(0, prefix.size() - 1) + " template computing the chain; " + s.note;
    s.applies = json::object();  // the chain target's facts are not the op's: the kernel checks the call
    s.capacity.clear();
    for (auto& [name, values] : s.params.items())
      for (auto& v : values)
        if (v == "$row") v = row;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

ChainStrategies chain_strategies(const Target& t) {
  ChainStrategies out;
  std::string head_why, rms_why;
  const std::string head = head_definition(t, &head_why);
  if (!head.empty()) {
    out.strategies = family_strategies("native_group_norm", "group_norm_", head, 0);
    if (out.strategies.empty()) out.why = "the group norm family has no template with a FORGE_CHAIN line";
    return out;
  }
  std::string norm_why;
  const std::string norm = norm_definition(t, &norm_why);
  if (!norm.empty() || norm_why != "no group or layer norm") {
    if (norm.empty()) return out.why = norm_why, out;
    out.strategies = chain_templates(
        "group_norm_prologue",
        "the chain's ops before its group norm applied as each element is read, the rest before it is stored", norm,
        {{"cpu", "cpu_group_norm_prologue.cpp", json{{"ISA", {0, 2, 3}}}},
         {"cuda", "cuda_group_norm_prologue.cu", json{{"BLOCK", {512, 256, 1024}}, {"ONE_PASS", {0, 1}}}}});
    return out;
  }
  int64_t row = 0;
  const std::string rms = rms_definition(t, &row, &rms_why);
  if (!rms.empty()) {
    out.strategies = family_strategies("_fused_rms_norm", "rms_norm_", rms, row);
    if (out.strategies.empty()) out.why = "the rms_norm family has no template with a FORGE_CHAIN line";
    return out;
  }
  std::string reduce_why;
  const std::string reduced = reduce_definition(t, &reduce_why);
  const std::string definition = reduced.empty() ? chain_definition(t, &out.why) : reduced;
  if (definition.empty()) {
    // A group norm head, an RMSNorm or a reduction that could not be generated
    // says why, not the pointwise reason.
    if (head_why != "no norm heads it") out.why = head_why;
    else if (rms_why.rfind("not an RMSNorm", 0) != 0) out.why = rms_why;
    else if (reduce_why != "no reduction") out.why = reduce_why;
    return out;
  }
  out.strategies =
      reduced.empty()
          ? chain_templates("fused_pointwise", "the chain's ops in one pass, generated from its definition", definition,
                            {{"cpu", "cpu_fused_pointwise.cpp", json{{"ISA", {0, 2, 3}}, {"UNROLL", {2, 1, 4}}}},
                             {"cuda", "cuda_fused_pointwise.cu", json{{"BLOCK", {256, 128, 512}}, {"VEC", {4, 8, 2, 1}}}}})
          : chain_templates("reduce_pointwise",
                            "the chain's reduction and its pointwise ops in one kernel, generated from its definition",
                            definition,
                            {{"cpu", "cpu_reduce_pointwise.cpp", json{{"ISA", {0, 2, 3}}}},
                             {"cuda", "cuda_reduce_pointwise.cu", json{{"BLOCK", {512, 256, 1024}}}}});
  return out;
}

}  // namespace forge
