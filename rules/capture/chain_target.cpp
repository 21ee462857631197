#include "rules/capture/chain_target.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "rules/capture/capture.h"
#include "util/hash.h"

namespace forge {
using nlohmann::json;

namespace {

bool is_tensor(const json& rec) { return rec.is_object() && rec.value("type", "") == "Tensor"; }

// The functional op an out= variant stands for, when the program called that
// op and the backend ran its out= variant (torch.abs(x) runs abs.out on the
// CPU and CUDA): {op, overload}; else nullopt. The chain then calls the
// functional op, so the out buffer, written and read by nothing else, is no
// input of the chain.
std::optional<std::pair<std::string, std::string>> functional_of(const json& e) {
  const std::string op = e.value("op", "");
  const auto dot = op.find('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string base = op.substr(0, dot), overload = op.substr(dot + 1);
  if (overload != "out" && (overload.size() < 4 || overload.compare(overload.size() - 4, 4, "_out") != 0))
    return std::nullopt;
  const std::string outer = e.value("outer_op", "");
  const auto odot = outer.find('.');
  if (outer.substr(0, odot) != base) return std::nullopt;
  bool has_out = false;
  for (const auto& a : e.value("args", json::array()))
    if (a.is_object() && a.value("name", "") == "out") has_out = is_tensor(a) && a.value("changed", false);
  if (!has_out) return std::nullopt;
  return std::make_pair(base, odot == std::string::npos ? std::string() : outer.substr(odot + 1));
}

// How many of the last op's returns the chain outputs: all of them where the
// program called the op itself; through a composite (group_norm runs
// native_group_norm and returns its first result alone) the first, and up to
// the last one a recorded op reads. Statistics nothing reads are no outputs,
// so a pointwise prologue -> norm chain writes one tensor as the norm module does.
size_t readable_returns(const json& record, int entry, const json& e) {
  const size_t all = e.value("outputs", json::array()).size();
  if (e.value("outer_op", "") == e.value("op", "")) return all;
  size_t n = std::min<size_t>(all, 1);
  for (const auto& f : record.value("flows", json::array()))
    if (f.value("from", -1) == entry) n = std::max(n, std::min(all, f.value("out", size_t{0}) + 1));
  return n;
}

// {"op": "aten::<name>", "overload"} of an op spelled "name.overload".
json aten_spelling(const std::string& op) {
  const auto dot = op.find('.');
  return {{"op", "aten::" + op.substr(0, dot)}, {"overload", dot == std::string::npos ? "" : op.substr(dot + 1)}};
}

}  // namespace

std::optional<Target> chain_target(const std::string& model, const json& record, const Chain& chain,
                                   std::string* why) {
  const json& entries = record.at("entries");
  // (consumer entry, input index) -> (producer entry, output)
  std::map<std::pair<int, int>, std::pair<int, int>> from;
  for (const auto& f : record.value("flows", json::array()))
    from[{f.value("to", -1), f.value("in", -1)}] = {f.value("from", -1), f.value("out", 0)};
  std::map<int, int> position;  // entry -> its op's index in the chain
  for (size_t j = 0; j < chain.entries.size(); ++j) position[chain.entries[j]] = static_cast<int>(j);

  // Op j's argument i in each captured call of the op: the sample entries
  // (store digests), none where any call has no data for it.
  auto input_samples = [&](int j, int i) {
    json out = json::array();
    for (const auto& smp : entries.at(static_cast<size_t>(chain.entries[static_cast<size_t>(j)])).value("samples", json::array())) {
      const json s = sample_entries(smp);
      const json v = static_cast<size_t>(i) < s.size() ? s[static_cast<size_t>(i)] : json();
      // A partial sample's digest covers its leading part only (docs/CAPTURE.md,
      // "Samples"): two reads agree there and in their metadata. That merges them
      // for verification; the routes that call the chain's op check at run time
      // that both reads are one tensor (runtime/autoload/forge_autoload).
      if (!v.is_object() || !v.contains("digest")) return json::array();
      out.push_back({v["digest"], v.value("stored_numel", json())});
    }
    return out;
  };
  Target t;
  t.model = model;
  json ops = json::array();
  // The chain's inputs: (op index, argument index) in reading order.
  std::vector<std::pair<int, int>> inputs;
  std::string readable;
  for (size_t j = 0; j < chain.entries.size(); ++j) {
    const json& e = entries.at(static_cast<size_t>(chain.entries[j]));
    std::string op = e.value("op", "");
    json args = e.value("args", json::array());
    const auto functional = functional_of(e);
    if (functional) op = functional->first + (functional->second.empty() ? "" : "." + functional->second);
    // A cast (copy_ into a fresh tensor under .to(), chains.h): _to_copy(src, dtype),
    // its destination no input of the chain.
    const std::string cast = cast_dtype(e);
    if (!cast.empty()) {
      op = "_to_copy";
      args = json::array({args[1], {{"name", "dtype"}, {"type", "ScalarType"}, {"value", cast}}});
    }
    const size_t recorded = cast.empty() ? 0 : 1;  // args[i] is the record's argument i + recorded
    for (size_t i = 0; i < args.size(); ++i) {
      json& a = args[i];
      if (functional && a.is_object() && a.value("name", "") == "out") continue;  // dropped below
      if (a.is_object() && a.value("type", "") == "list")
        for (const auto& item : a.value("value", json::array()))
          if (is_tensor(item)) {
            *why = op + " takes a tensor list, which a chain's op cannot";
            return std::nullopt;
          }
      if (!is_tensor(a)) continue;
      // The earlier chain op (and its output) this argument is, if any: the
      // chain's own links (the trace's), else the record's flows.
      std::optional<std::pair<int, int>> link;
      if (!chain.links.empty()) {
        if (auto l = chain.links.find({static_cast<int>(j), static_cast<int>(i + recorded)}); l != chain.links.end())
          link = l->second;
      } else if (auto it = from.find({chain.entries[j], static_cast<int>(i + recorded)});
                 it != from.end() && position.count(it->second.first) && position[it->second.first] < static_cast<int>(j)) {
        link = std::make_pair(position[it->second.first], it->second.second);
      }
      if (link) {
        // The data flow looks through views: the link is the producer's output
        // itself only where the consumer read it as returned.
        const int producer = chain.entries[static_cast<size_t>(link->first)];
        const json outs = entries.at(static_cast<size_t>(producer)).value("outputs", json::array());
        const size_t k_out = static_cast<size_t>(link->second);
        const json produced = outs.is_array() && k_out < outs.size() ? outs[k_out] : json();
        for (const char* k : {"dtype", "sizes", "strides"})
          if (!produced.is_object() || produced.value(k, json()) != a.value(k, json())) {
            *why = op + " reads a view of " + entries.at(static_cast<size_t>(producer)).value("op", "") +
                   "'s output, which a chain's op cannot";
            return std::nullopt;
          }
        a["ref"] = {{"op", link->first}, {"output", link->second}};
      } else {
        // One tensor read by two ops (RMSNorm's x by pow and by mul) is one
        // input: the same record and, in every captured call, the same data.
        const json mine = input_samples(static_cast<int>(j), static_cast<int>(i + recorded));
        int same = -1;
        for (size_t k = 0; k < inputs.size() && same < 0; ++k) {
          // Reads by one op, or by two places of one entry (whose samples are
          // the same calls'), agree in their samples whatever they read: a
          // fresh batch norm's weight and running variance are both ones.
          if (inputs[k].first == static_cast<int>(j) ||
              chain.entries[static_cast<size_t>(inputs[k].first)] == chain.entries[j])
            continue;
          const json& other = entries.at(static_cast<size_t>(chain.entries[static_cast<size_t>(inputs[k].first)]))
                                  .at("args")
                                  .at(static_cast<size_t>(inputs[k].second));
          const json& here = e["args"][i + recorded];
          bool alike = !mine.empty() && input_samples(inputs[k].first, inputs[k].second) == mine;
          for (const char* f : {"dtype", "sizes", "strides", "device"}) alike = alike && other.value(f, json()) == here.value(f, json());
          if (alike) same = static_cast<int>(k);
        }
        if (same >= 0) {
          a["ref"] = {{"input", same}};
          continue;
        }
        a["ref"] = {{"input", static_cast<int>(inputs.size())}};
        inputs.push_back({static_cast<int>(j), static_cast<int>(i + recorded)});
        json in = e["args"][i + recorded];
        in["name"] = "op" + std::to_string(j) + "_" + in.value("name", "arg" + std::to_string(i));
        t.args.push_back(std::move(in));
      }
    }
    // An in-place op changes its self, the previous chain op's result, which
    // nothing else reads (chains.cpp): the chain computes its functional op;
    // `called_as` keeps the eager spelling, which a module forward's recorded
    // calls show (runtime/autoload/forge_autoload/modules.py).
    json called_as;
    if (in_place(e)) {
      const json self = !args.empty() && is_tensor(args[0]) ? args[0].value("ref", json()) : json();
      if (!self.is_object() || !self.contains("op")) {
        *why = op + " changes a chain input in place";
        return std::nullopt;
      }
      called_as = aten_spelling(op);
      op = functional_spelling(op);
    }
    if (functional) {
      json kept = json::array();
      for (auto& a : args)
        if (!(a.is_object() && a.value("name", "") == "out")) kept.push_back(std::move(a));
      args = std::move(kept);
    }
    ops.push_back(aten_spelling(op));
    ops.back()["args"] = std::move(args);
    if (!called_as.is_null()) ops.back()["called_as"] = std::move(called_as);
    readable += (j ? " -> " : "") + e.value("signature", op);
  }
  const json& last = entries.at(static_cast<size_t>(chain.entries.back()));
  t.outputs = last.value("outputs", json::array());
  t.outputs.erase(t.outputs.begin() + static_cast<long>(readable_returns(record, chain.entries.back(), last)),
                  t.outputs.end());
  if (t.outputs.empty()) {
    *why = "its last op returns nothing";
    return std::nullopt;
  }
  for (const auto& o : t.outputs)
    if (!is_tensor(o)) {
      *why = "its last op returns a non-tensor";
      return std::nullopt;
    }
  t.chain = {{"inputs", inputs.size()}, {"ops", std::move(ops)}, {"outputs", t.outputs.size()}};
  t.op = "forge_chain::c_" + sha256_hex(t.chain.dump()).substr(0, 16);
  t.outer_op = "chain";
  t.signature = "chain(" + readable + ")";
  t.id = make_target_id(model, "chain", t.signature);
  t.calls = chain.calls;
  t.time_us = chain.time_us;
  t.bytes = bytes_moved(t.args, t.outputs);
  // Samples: the k-th captured call of each op, for k up to the fewest any op kept.
  auto samples_of = [&](int j) {
    return entries.at(static_cast<size_t>(chain.entries[static_cast<size_t>(j)])).value("samples", json::array());
  };
  size_t n = inputs.empty() ? 0 : SIZE_MAX;
  for (const auto& [j, i] : inputs) n = std::min(n, samples_of(j).size());
  t.sample_inputs = json::array();
  for (size_t k = 0; k < n; ++k) {
    json in = json::array();
    for (const auto& [j, i] : inputs) {
      const json s = sample_entries(samples_of(j)[k]);
      in.push_back(static_cast<size_t>(i) < s.size() ? s[static_cast<size_t>(i)] : json(nullptr));
    }
    t.sample_inputs.push_back({{"inputs", std::move(in)}});
  }
  t.samples = static_cast<int>(t.sample_inputs.size());
  return t;
}

}  // namespace forge
