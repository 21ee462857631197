#include "rules/strategies.h"

#include <set>

#include <yaml-cpp/yaml.h>

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
      const std::string s = n.Scalar();
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

}  // namespace

std::vector<Strategy> load_strategies(const Family& family) {
  const fs::path file = family.path.parent_path() / "strategies.yaml";
  std::vector<Strategy> out;
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
    if (!read_file(st.source, &st.text))
      throw Error(at("'" + st.name + "': cannot read " + st.source.string()));
    out.push_back(std::move(st));
  }
  return out;
}

bool strategy_applies(const Strategy& s, const Target& target, const std::string& backend) {
  if (s.backend != backend) return false;
  const json* in = first_tensor(target.args);
  if (!in) return false;
  if (!listed(s.applies.value("dtype", json()), in->value("dtype", ""))) return false;
  const json* out = first_tensor(target.outputs);
  if (out && !listed(s.applies.value("out_dtype", json()), out->value("dtype", ""))) return false;
  // layout: one name or a list. "contiguous"/"nchw" need a row-major input; other
  // layouts (channels_last) are left to the kernel's own run-time check.
  json layouts = s.applies.value("layout", json());
  if (layouts.is_string()) layouts = json::array({layouts});
  if (layouts.is_array() && !layouts.empty()) {
    bool ok = false;
    for (const auto& l : layouts) {
      const std::string name = l.is_string() ? l.get<std::string>() : "";
      ok |= ((name == "contiguous" || name == "nchw") && contiguous(*in)) ||
            (name != "contiguous" && name != "nchw");
    }
    if (!ok) return false;
  }
  return true;
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

std::string instantiate(const Strategy& s, const json& params) {
  std::string head = "// forge strategy " + s.name + "\n";
  for (const auto& [name, value] : params.items()) {
    // "$row" and other "$" values name signature facts forge does not substitute
    // yet: the template's default stands in.
    if (value.is_string() && value.get<std::string>().rfind("$", 0) == 0) continue;
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
    for (const auto& s : m_strategies) add(s, param_grid(s).front());
    for (const auto& s : m_strategies)
      for (const auto& p : param_grid(s)) add(s, p);
    return out;
  }
  for (const auto& s : m_strategies) {
    if (s.name != node.action.strategy) continue;
    // Neighbours: one parameter moved one step in its value list.
    for (const auto& [name, values] : s.params.items()) {
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] != node.action.params.value(name, json())) continue;
        for (long d : {-1L, 1L}) {
          long j = static_cast<long>(i) + d;
          if (j < 0 || j >= static_cast<long>(values.size())) continue;
          json p = node.action.params;
          p[name] = values[static_cast<size_t>(j)];
          add(s, p);
        }
      }
    }
  }
  return out;
}

}  // namespace forge
