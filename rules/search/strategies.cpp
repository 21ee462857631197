#include "rules/search/strategies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "runtime/common/dtypes.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& x : n) j.push_back(yaml_to_json(x));
      return j;
    }
    case YAML::NodeType::Scalar: {
      // YAML's plain true/false are booleans (applies: {training: false}).
      const std::string s = n.Scalar();
      if (n.Tag() != "!") {
        if (s == "true" || s == "True" || s == "TRUE") return true;
        if (s == "false" || s == "False" || s == "FALSE") return false;
      }
      try {
        size_t used = 0;
        long long i = std::stoll(s, &used);
        if (used == s.size()) return i;
      } catch (...) {
      }
      return s;
    }
    default:
      return nullptr;
  }
}

bool contiguous(const json& t) {
  const auto& sizes = t.value("sizes", json::array());
  const auto& strides = t.value("strides", json::array());
  if (sizes.size() != strides.size()) return false;
  long long expect = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i].get<long long>() != 1 && strides[i].get<long long>() != expect) return false;
    expect *= sizes[i].get<long long>();
  }
  return true;
}

// Do dims [first, ndim) of tensor record `t` run through memory by one
// stride? (dims of extent 1 take any stride; host_one_stride in
// targets/_common/layer_norm_strided_parse.h is the kernels' side of it)
bool one_stride(const json& t, size_t first) {
  const auto sizes = t.value("sizes", std::vector<int64_t>{});
  const auto strides = t.value("strides", std::vector<int64_t>{});
  if (sizes.size() != strides.size()) return false;
  bool seen = false;
  int64_t next = 0;
  for (size_t d = sizes.size(); d-- > first;) {
    if (sizes[d] == 1) continue;
    if (seen && strides[d] != next) return false;
    seen = true;
    next = strides[d] * sizes[d];
  }
  return true;
}

const json* first_tensor(const json& list) {
  for (const auto& a : list)
    if (a.is_object() && a.value("type", "") == "Tensor") return &a;
  return nullptr;
}

bool listed(const json& allowed, const std::string& value) {
  if (!allowed.is_array()) return true;
  for (const auto& v : allowed)
    if (v.is_string() && v.get<std::string>() == value) return true;
  return false;
}

// An int or int[] argument record's values ("list" of int records too).
std::vector<int64_t> ints_of(const json& rec) {
  std::vector<int64_t> out;
  const json& v = rec.value("value", json());
  if (v.is_number_integer()) out.push_back(v.get<int64_t>());
  if (v.is_array())
    for (const auto& x : v) {
      if (x.is_number_integer()) out.push_back(x.get<int64_t>());
      else if (x.is_object() && x.value("value", json()).is_number_integer())
        out.push_back(x["value"].get<int64_t>());
    }
  return out;
}

bool in_range(const json& range, std::optional<int64_t> v) {
  if (!range.is_array() || range.size() != 2) return true;
  return v && *v >= range[0].get<int64_t>() && *v <= range[1].get<int64_t>();
}

}  // namespace

SignatureFacts signature_facts(const Target& target) {
  SignatureFacts f;
  const size_t dot = target.op.find('.');
  f.op_name = target.op.substr(0, dot);
  if (f.op_name.size() > 1 && f.op_name.back() == '_') f.op_name.pop_back();  // in place
  f.op = f.op_name + (dot == std::string::npos ? "" : target.op.substr(dot));
  const json& a = target.args;
  const json* in = first_tensor(a);
  const json* out = first_tensor(target.outputs);
  if (in && out) {
    // The ABI codes (runtime/common/dtypes.h) of the floating types the
    // templates' with_dtype covers.
    auto code = [](const std::string& name) -> std::optional<int32_t> {
      const dtypes::Dtype* d = dtypes::find(name);
      if (!d || !(name == "float32" || name == "float16" || name == "bfloat16")) return std::nullopt;
      return d->abi;
    };
    if (const dtypes::Dtype* d = dtypes::find(in->value("dtype", ""))) f.in_bytes = d->bytes;
    if (const dtypes::Dtype* d = dtypes::find(out->value("dtype", ""))) f.out_bytes = d->bytes;
    if (code(in->value("dtype", "")) && code(out->value("dtype", ""))) {
      // Every tensor's type, not the first input's and output's alone
      // (autocast's bf16 input with float32 weights): an instance without
      // one refuses every call.
      auto add = [&](const json& t) {
        if (!t.is_object() || t.value("type", "") != "Tensor") return;
        if (auto c = code(t.value("dtype", ""))) f.dtypes |= 1u << *c;
      };
      for (const json* list : {&target.args, &target.outputs})
        for (const auto& rec : *list) {
          add(rec);
          if (rec.is_object() && rec.value("value", json()).is_array())
            for (const auto& t : rec["value"]) add(t);  // a Tensor[] argument
        }
    }
  }
  if (!in || !a.is_array() || a.size() < 2) return f;
  std::vector<int64_t> sizes = in->value("sizes", std::vector<int64_t>{});
  const int64_t nd = static_cast<int64_t>(sizes.size());
  auto product = [](const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (auto x : v) p *= x;
    return p;
  };
  const std::string op = target.op;
  if (op == "_softmax" || op == "_log_softmax") {
    auto d = ints_of(a[1]);
    if (d.size() == 1 && nd > 0) {
      int64_t dim = d[0] < 0 ? d[0] + nd : d[0];
      if (dim >= 0 && dim < nd) f.row = sizes[dim], f.dim_last = dim == nd - 1;
    }
  } else if (op == "native_layer_norm" || op == "_fused_rms_norm") {
    auto shape = ints_of(a[1]);
    if (!shape.empty()) f.row = product(shape);
    // The row's dims: the input's trailing len(shape), and every dim of a
    // weight or bias tensor.
    if (!shape.empty() && shape.size() <= sizes.size()) {
      f.row_one_stride = one_stride(*in, sizes.size() - shape.size());
      for (size_t k = 2; k < a.size() && k < 4; ++k)
        if (a[k].is_object() && a[k].value("type", "") == "Tensor") f.row_one_stride &= one_stride(a[k], 0);
    }
  } else if (op == "mean.dim") {
    auto dims = ints_of(a[1]);
    std::vector<int64_t> reduced;
    for (auto d : dims) reduced.push_back(d < 0 ? d + nd : d);
    std::sort(reduced.begin(), reduced.end());
    bool trailing = !reduced.empty();
    for (size_t k = 0; k < reduced.size(); ++k)
      trailing &= reduced[k] == nd - static_cast<int64_t>(reduced.size()) + static_cast<int64_t>(k);
    f.reduce_trailing = trailing;
    if (trailing) {
      int64_t plane = 1;
      for (auto d : reduced) plane *= sizes[d];
      f.plane = f.row = plane;
    }
  } else if (op == "native_group_norm" && a.size() >= 7) {
    auto n = ints_of(a[3]), c = ints_of(a[4]), hw = ints_of(a[5]), g = ints_of(a[6]);
    if (n.size() == 1 && c.size() == 1 && hw.size() == 1 && g.size() == 1 && g[0] > 0) {
      f.slice = c[0] / g[0] * hw[0];
      f.groups = n[0] * g[0];
    }
  } else if ((op == "native_batch_norm" || op == "cudnn_batch_norm") && a.size() >= 6) {
    const json& tr = a[5].value("value", json());
    if (tr.is_boolean()) f.training = tr.get<bool>();
    if (nd >= 2) f.plane = product(std::vector<int64_t>(sizes.begin() + 2, sizes.end()));
  }
  return f;
}

namespace {

// Templates share their helper blocks through targets/_common/: a line that
// starts with `#include "../_common/NAME"` is replaced by that file's text, so
// every candidate stays one self-contained source (what is compiled, hashed,
// committed to history and replayed later), while a template file still
// compiles on its own (bench/templates/run_cpu.py compiles it). A shared block may include others the
// same way (the path works from _common/ too), up to a small depth.
std::string inline_common(const std::string& text, const fs::path& source, int depth = 0) {
  static const std::string directive = "#include \"../_common/";
  std::string out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind(directive, 0) != 0) {
      out += line;
      if (!in.eof()) out += '\n';
      continue;
    }
    const size_t end = line.find('"', directive.size());
    const fs::path file = source.parent_path() / ".." / "_common" /
                          line.substr(directive.size(), end == std::string::npos ? std::string::npos : end - directive.size());
    std::string common;
    if (end == std::string::npos || !read_file(file, &common))
      throw Error(source.string() + ":" + std::to_string(number) + ": cannot read the shared block " +
                  file.lexically_normal().string());
    if (depth >= 4)
      throw Error(source.string() + ":" + std::to_string(number) + ": shared blocks nested more than 4 deep (a cycle?) at " +
                  file.lexically_normal().string());
    out += inline_common(common, file, depth + 1);
  }
  return out;
}

}  // namespace

std::string load_template(const fs::path& source) {
  std::string text;
  if (!read_file(source, &text)) throw Error("cannot read the template " + source.string());
  return inline_common(text, source);
}

std::vector<Strategy> load_strategies(const Family& family) {
  std::vector<Strategy> out;
  if (family.path.empty()) return out;  // a derived family: no library folder
  const fs::path file = family.path.parent_path() / "strategies.yaml";
  if (!fs::exists(file)) return out;
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    throw Error(file.string() + ":" + std::to_string(e.mark.line + 1) + ":" +
                std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
  for (const auto& s : root["strategies"]) {
    Strategy st;
    auto at = [&](const std::string& what) {
      return file.string() + ":" + std::to_string(s.Mark().line + 1) + ": strategy " + what;
    };
    if (!s["name"] || !s["source"] || !s["backend"])
      throw Error(at("needs name, backend and source"));
    st.name = s["name"].as<std::string>();
    st.backend = s["backend"].as<std::string>();
    st.source = family.path.parent_path() / s["source"].as<std::string>();
    st.params = s["params"] ? yaml_to_json(s["params"]) : json::object();
    st.applies = s["applies"] ? yaml_to_json(s["applies"]) : json::object();
    st.note = s["note"] ? s["note"].as<std::string>() : "";
    if (s["capacity"]) {
      if (!s["capacity"].IsMap()) throw Error(at("'" + st.name + "': capacity must be a map {row: A*B*...}"));
      for (const auto& kv : s["capacity"]) {
        const std::string fact = kv.first.as<std::string>();
        if (fact != "row" && fact != "slice")
          throw Error(at("'" + st.name + "': capacity." + fact + ": only row and slice have a capacity"));
        std::vector<std::string> factors;
        std::stringstream text(kv.second.as<std::string>());
        for (std::string f; std::getline(text, f, '*');) {
          f.erase(0, f.find_first_not_of(' '));
          f.erase(f.find_last_not_of(' ') + 1);
          const bool number = !f.empty() && f.find_first_not_of("0123456789") == std::string::npos;
          if (!number && f != "$vec" && !st.params.contains(f))
            throw Error(at("'" + st.name + "': capacity." + fact + ": '" + f +
                           "' is neither a param, an integer nor $vec"));
          factors.push_back(f);
        }
        st.capacity[fact] = std::move(factors);
      }
    }
    if (!fs::exists(st.source)) throw Error(at("'" + st.name + "': cannot read " + st.source.string()));
    st.text = load_template(st.source);
    out.push_back(std::move(st));
  }
  return out;
}

namespace {

std::string list_text(const json& allowed) {
  std::string out;
  for (const auto& v : allowed) out += (out.empty() ? "" : ", ") + (v.is_string() ? v.get<std::string>() : v.dump());
  return "[" + out + "]";
}

// How far `v` lies outside `range`, as the ratio's log2 (0 inside, 64 without a value).
double range_distance(const json& range, std::optional<int64_t> v) {
  if (!v) return 64;
  const double lo = static_cast<double>(range[0].get<int64_t>()), hi = static_cast<double>(range[1].get<int64_t>());
  const double x = static_cast<double>(std::max<int64_t>(*v, 1));
  return x < lo ? std::log2(lo / x) : x > hi ? std::log2(x / hi) : 0;
}

}  // namespace

namespace {

std::optional<int64_t> fact_of(const SignatureFacts& f, const std::string& name) {
  return name == "row" ? f.row : name == "slice" ? f.slice : std::nullopt;
}

// $vec for an extent `fact`: the input's elements per 16 bytes when the
// extent is whole 16-byte vectors of the input and of the output (the
// templates' vector path), else 1.
std::optional<int64_t> vec_of(std::optional<int64_t> fact, const SignatureFacts& f) {
  if (f.in_bytes <= 0) return std::nullopt;
  const bool whole = fact && (*fact * f.in_bytes) % 16 == 0 && (f.out_bytes <= 0 || (*fact * f.out_bytes) % 16 == 0);
  return whole ? std::max(1, 16 / f.in_bytes) : 1;
}

// The capacity's product for `params` (nullopt: a factor has no value here).
std::optional<int64_t> capacity_of(const std::vector<std::string>& factors, const json& params,
                                   std::optional<int64_t> vec) {
  int64_t product = 1;
  for (const auto& f : factors) {
    if (f == "$vec") {
      if (!vec) return std::nullopt;
      product *= *vec;
    } else if (!f.empty() && std::isdigit(static_cast<unsigned char>(f[0]))) {
      product *= std::stoll(f);
    } else {
      const json& v = params.value(f, json());
      if (!v.is_number_integer()) return std::nullopt;
      product *= v.get<int64_t>();
    }
  }
  return product;
}

std::string factors_text(const std::vector<std::string>& factors) {
  std::string out;
  for (const auto& f : factors) out += (out.empty() ? "" : "*") + f;
  return out;
}

}  // namespace

bool fits_capacity(const Strategy& s, const json& params, const SignatureFacts& facts) {
  for (const auto& [name, factors] : s.capacity) {
    const auto fact = fact_of(facts, name);
    const auto cap = capacity_of(factors, params, vec_of(fact, facts));
    if (fact && cap && *fact > *cap) return false;
  }
  return true;
}

std::optional<json> first_fitting(const Strategy& s, const SignatureFacts& facts) {
  for (const auto& p : param_grid(s))
    if (fits_capacity(s, p, facts)) return p;
  return std::nullopt;
}

std::vector<std::string> unmet_conditions(const Strategy& s, const Target& target, const std::string& backend,
                                          double* distance) {
  std::vector<std::string> unmet;
  double far = 0;
  auto miss = [&](std::string what, double d = 1) {
    unmet.push_back(std::move(what));
    far += d;
  };
  if (s.backend != backend) miss("backend " + s.backend + " (here " + backend + ")", 64);
  const json* in = first_tensor(target.args);
  if (!in) {
    miss("a tensor input (here none)", 64);
    if (distance) *distance = far;
    return unmet;
  }
  const std::string dtype = in->value("dtype", "");
  if (!listed(s.applies.value("dtype", json()), dtype))
    miss("dtype in " + list_text(s.applies["dtype"]) + " (here " + dtype + ")", 8);
  const json* out = first_tensor(target.outputs);
  const std::string out_dtype = out ? out->value("dtype", "") : "";
  if (out && !listed(s.applies.value("out_dtype", json()), out_dtype))
    miss("out_dtype in " + list_text(s.applies["out_dtype"]) + " (here " + out_dtype + ")", 8);
  // Extents and shape facts (signature_facts); a condition on a fact the op
  // does not have fails, so a strategy is never tried where it cannot apply.
  const SignatureFacts f = signature_facts(target);
  // layout: one name or a list. "contiguous"/"nchw" need a row-major input;
  // "strided_rows" a non-contiguous one whose row dims step by one stride
  // (SignatureFacts::row_one_stride); other layouts (channels_last) are left
  // to the kernel's own run-time check.
  json layouts = s.applies.value("layout", json());
  if (layouts.is_string()) layouts = json::array({layouts});
  if (layouts.is_array() && !layouts.empty()) {
    const bool row_major = contiguous(*in);
    bool ok = false, strided_listed = false;
    for (const auto& l : layouts) {
      const std::string name = l.is_string() ? l.get<std::string>() : "";
      if (name == "contiguous" || name == "nchw") ok |= row_major;
      else if (name == "strided_rows") {
        ok |= !row_major && f.row_one_stride;
        strided_listed = true;
      } else {
        ok = true;
      }
    }
    // A strided input whose row does not step by one stride is nearer to a
    // strided_rows strategy than to a contiguous one (4 against 8).
    const bool near = strided_listed && !row_major;
    if (!ok)
      miss("layout " + list_text(layouts) + " (here strides " + in->value("strides", json::array()).dump() +
               " for sizes " + in->value("sizes", json::array()).dump() +
               (near ? ": the row's dims do not step by one stride" : "") + ")",
           near ? 4 : 8);
  }
  const json& ap = s.applies;
  for (const auto& [key, fact] : {std::pair<const char*, std::optional<int64_t>>{"row", f.row},
                                  {"plane", f.plane}, {"slice", f.slice}, {"groups", f.groups}}) {
    const json& range = ap.value(key, json());
    if (in_range(range, fact)) continue;
    miss(std::string(key) + " in [" + range[0].dump() + ", " + range[1].dump() + "] (here " +
             (fact ? std::to_string(*fact) : std::string("no ") + key) + ")",
         range_distance(range, fact));
  }
  if (!listed(ap.value("op", json()), f.op)) miss("op in " + list_text(ap["op"]) + " (here " + f.op + ")", 64);
  if (ap.value("dim", "") == "last" && !f.dim_last) miss("dim last (here another dim)", 8);
  if (ap.value("dim", "") == "not_last" && (f.dim_last || !f.row)) miss("dim not the last (here the last)", 8);
  if (ap.value("reduce", "") == "trailing" && !f.reduce_trailing) miss("reduce trailing (here other dims)", 8);
  if (ap.contains("training") && (!f.training || *f.training != ap["training"].get<bool>()))
    miss(std::string("training ") + (ap["training"].get<bool>() ? "true" : "false") + " (here " +
             (f.training ? (*f.training ? "true" : "false") : "unknown") + ")",
         8);
  // Capacity: some instance must hold the signature's extent.
  for (const auto& [name, factors] : s.capacity) {
    const auto fact = fact_of(f, name);
    if (!fact) continue;
    std::optional<int64_t> most;
    for (const auto& p : param_grid(s))
      if (auto cap = capacity_of(factors, p, vec_of(fact, f))) most = std::max(most.value_or(0), *cap);
    if (most && *fact > *most)
      miss(name + " <= " + factors_text(factors) + ", at most " + std::to_string(*most) + " (here " +
               std::to_string(*fact) + ")",
           std::log2(static_cast<double>(*fact) / static_cast<double>(*most)));
  }
  if (distance) *distance = far;
  return unmet;
}

bool strategy_applies(const Strategy& s, const Target& target, const std::string& backend) {
  return unmet_conditions(s, target, backend).empty();
}

std::optional<NearestStrategy> nearest_strategy(const std::vector<Strategy>& strategies, const Target& target,
                                                const std::string& backend) {
  std::optional<NearestStrategy> best;
  double best_distance = 0;
  for (const auto& s : strategies) {
    if (s.backend != backend) continue;
    double distance = 0;
    auto unmet = unmet_conditions(s, target, backend, &distance);
    // Fewest unmet conditions first, then the nearest; file order breaks ties.
    if (!best || unmet.size() < best->unmet.size() ||
        (unmet.size() == best->unmet.size() && distance < best_distance)) {
      best = NearestStrategy{&s, std::move(unmet)};
      best_distance = distance;
    }
  }
  return best;
}

std::vector<json> param_grid(const Strategy& s) {
  std::vector<json> grid{json::object()};
  for (const auto& [name, values] : s.params.items()) {
    std::vector<json> next;
    for (const auto& g : grid)
      for (const auto& v : values) {
        json x = g;
        x[name] = v;
        next.push_back(x);
      }
    grid = std::move(next);
  }
  return grid;
}

std::string instantiate(const Strategy& s, const json& params, const SignatureFacts& facts) {
  std::string head = "// forge strategy " + s.name + "\n";
  if (facts.dtypes) head += "#define FORGE_DTYPES " + std::to_string(facts.dtypes) + "\n";
  for (const auto& [name, value] : params.items()) {
    // "$row": the signature's row length, a compile-time constant the signature
    // family keeps fixed. Unknown facts leave the template's default (0 = read
    // the length at run time), which is always correct.
    if (value.is_string() && value.get<std::string>().rfind("$", 0) == 0) {
      if (value.get<std::string>() == "$row" && facts.row)
        head += "#define FORGE_P_" + name + " " + std::to_string(*facts.row) + "\n";
      if (value.get<std::string>() == "$op" && !facts.op_name.empty())
        head += "#define FORGE_P_" + name + " " + facts.op_name + "\n";
      continue;
    }
    head += "#define FORGE_P_" + name + " " +
            (value.is_string() ? value.get<std::string>() : value.dump()) + "\n";
  }
  return head + s.text;
}

std::vector<mcts::Action> StrategyProposer::actions(const mcts::Tree& tree, mcts::NodeId parent,
                                                   mcts::Rng&) {
  std::set<std::string> seen;
  for (const auto& n : tree.nodes()) seen.insert(n.key);
  std::vector<mcts::Action> out;
  auto add = [&](const Strategy& s, const json& p) {
    mcts::Action a{"strategy", s.name, p, ""};
    if (seen.insert(mcts::action_key(a)).second) out.push_back(a);
  };
  const mcts::Node& node = tree.node(parent);
  if (parent == mcts::kRoot) {
    for (const auto& s : m_strategies)
      if (auto p = first_fitting(s, m_facts)) add(s, *p);
    for (const auto& s : m_strategies)
      for (const auto& p : param_grid(s))
        if (fits_capacity(s, p, m_facts)) add(s, p);
    return out;
  }
  for (const auto& s : m_strategies)
    if (s.name == node.action.strategy)
      for (const auto& p : param_neighbours(s, node.action.params, m_facts)) add(s, p);
  return out;
}

std::vector<json> param_neighbours(const Strategy& s, const json& params, const SignatureFacts& facts) {
  std::vector<json> out;
  for (const auto& [name, values] : s.params.items()) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != params.value(name, json())) continue;
      for (long d : {-1L, 1L}) {
        long j = static_cast<long>(i) + d;
        if (j < 0 || j >= static_cast<long>(values.size())) continue;
        json p = params;
        p[name] = values[static_cast<size_t>(j)];
        if (fits_capacity(s, p, facts)) out.push_back(std::move(p));
      }
    }
  }
  return out;
}

}  // namespace forge
