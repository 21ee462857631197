#include "rules/capture/chains.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "rules/capture/selection.h"

namespace forge {
namespace {
using nlohmann::json;

// Matrix products and convolutions: a chain may start after one (its
// epilogue), not include it.
bool is_gemm_or_conv(const std::string& op) {
  static const std::set<std::string> names = {
      "mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot",
      "_scaled_mm", "_int_mm", "convolution", "_convolution", "conv2d", "conv1d", "conv3d",
      "cudnn_convolution", "cudnn_convolution_transpose", "mkldnn_convolution", "convolution_overrideable",
      "_slow_conv2d_forward", "slow_conv3d_forward", "slow_conv_transpose2d", "_nnpack_spatial_convolution",
      "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
      "_scaled_dot_product_cudnn_attention", "_flash_attention_forward", "_efficient_attention_forward"};
  return names.count(op.substr(0, op.find('.'))) > 0;
}

}  // namespace

std::string cast_dtype(const json& e) {
  // softmax(x, dim, dtype=float32) casts its input before _softmax (not on CUDA half: _softmax's half_to_float).
  static const std::set<std::string> casts = {"to.dtype", "to.dtype_layout", "to.other", "to.device", "type_as",
                                              "_to_copy", "float", "half", "bfloat16", "softmax.int",
                                              "log_softmax.int"};
  if (e.value("op", "") != "copy_" || !casts.count(e.value("outer_op", ""))) return "";
  const json args = e.value("args", json::array());
  if (args.size() < 2 || !args[0].is_object() || !args[1].is_object()) return "";
  const json& dst = args[0];
  const json& src = args[1];
  if (dst.value("type", "") != "Tensor" || src.value("type", "") != "Tensor") return "";
  for (const char* k : {"sizes", "device"})
    if (dst.value(k, json()) != src.value(k, json())) return "";
  return dst.value("dtype", "");
}

void append_entry(Chain& ch, int i, const json& e) {
  ch.entries.push_back(i);
  ch.ops.push_back(cast_dtype(e).empty() ? e.value("op", "") : "_to_copy");  // a cast as the chain runs it
  ch.signatures.push_back(e.value("signature", ""));
  ch.time_us += e.value("time_us", 0.0);
}

bool chain_op_eligible(const json& e, const std::string& backend) {
  if (!cast_dtype(e).empty()) return !inherent_reason(e, backend).has_value();
  if (e.value("kind", "kernel") != "kernel") return false;
  if (is_gemm_or_conv(e.value("op", ""))) return false;
  return !inherent_reason(e, backend).has_value();
}

std::vector<Chain> find_chains(const json& record, const std::string& backend) {
  const json& entries = record.contains("entries") ? record["entries"] : json::array();
  const int n = static_cast<int>(entries.size());
  auto calls_of = [&](int i) { return entries[static_cast<size_t>(i)].value("calls", 0L); };
  std::map<std::pair<int, long>, long> produced;  // (entry, out) -> tensors
  for (const auto& p : record.value("produced", json::array()))
    produced[{p.value("entry", -1), p.value("out", 0L)}] += p.value("tensors", 0L);
  std::map<std::pair<int, long>, long> consumed;  // (entry, out) -> uses by recorded calls
  std::map<int, long> consumed_any;               // entry -> uses of any of its outputs
  for (const auto& f : record.value("flows", json::array())) {
    consumed[{f.value("from", -1), f.value("out", 0L)}] += f.value("calls", 0L);
    consumed_any[f.value("from", -1)] += f.value("calls", 0L);
  }
  // A link a -> b: every call of a and of b, a's output k produced and used
  // exactly that often, by b alone, and no other output of a used.
  std::map<int, std::set<int>> into, out_of;
  for (const auto& f : record.value("flows", json::array())) {
    const int a = f.value("from", -1), b = f.value("to", -1);
    const long k = f.value("out", 0L), c = f.value("calls", 0L);
    if (a < 0 || b < 0 || a >= n || b >= n || a == b || c <= 0) continue;
    if (!chain_op_eligible(entries[static_cast<size_t>(a)], backend) || !chain_op_eligible(entries[static_cast<size_t>(b)], backend))
      continue;
    if (c != calls_of(a) || c != calls_of(b)) continue;
    if (produced[{a, k}] != c || consumed[{a, k}] != c || consumed_any[a] != c) continue;
    out_of[a].insert(b);
    into[b].insert(a);
  }
  // Linear runs: a node's one successor, a node's one predecessor.
  std::map<int, int> next, prev;
  for (const auto& [a, bs] : out_of)
    if (bs.size() == 1 && into[*bs.begin()].size() == 1) {
      next[a] = *bs.begin();
      prev[*bs.begin()] = a;
    }
  // The module every op of `ch` ran under, all of its calls, or under one of
  // its submodules: the deepest such path ("\n" when an op ran under several).
  // whole_forward: `ch` is every kernel that module's forward ran, itself or
  // through its submodules, so a kernel for the chain can stand in for it.
  auto module_of = [&](int i) {
    const json& e = entries[static_cast<size_t>(i)];
    return e.value("modules", json::object()).size() == 1 ? e.value("module", "") : std::string("\n");
  };
  auto within = [](const std::string& path, const std::string& ancestor) {
    return path == ancestor || (path.size() > ancestor.size() && path.compare(0, ancestor.size(), ancestor) == 0 &&
                                path[ancestor.size()] == '/');
  };
  auto set_module = [&](Chain& ch) {
    std::string common;
    for (size_t k = 0; k < ch.entries.size(); ++k) {
      const std::string m = module_of(ch.entries[k]);
      if (m.empty() || m == "\n") return;
      if (k == 0) {
        common = m;
        continue;
      }
      while (!common.empty() && !within(m, common)) {
        const auto slash = common.rfind('/');
        common = slash == std::string::npos ? "" : common.substr(0, slash);
      }
      if (common.empty()) return;
    }
    ch.module = common;
    const std::set<int> in_chain(ch.entries.begin(), ch.entries.end());
    ch.whole_forward = true;
    for (int i = 0; i < n; ++i) {
      const json& e = entries[static_cast<size_t>(i)];
      if (in_chain.count(i)) continue;
      bool under = false;
      const json mods = e.value("modules", json::object());
      for (const auto& [path, calls] : mods.items()) under = under || within(path, common);
      // Another kernel the module's forward ran; views and allocations need none.
      const std::string kind = e.value("kind", "kernel");
      if (under && kind != "view" && kind != "alloc") ch.whole_forward = false;
    }
  };
  auto chain_of = [&](const std::vector<int>& ids) {
    Chain ch;
    for (int i : ids) append_entry(ch, i, entries[static_cast<size_t>(i)]);
    ch.calls = calls_of(ids.front());
    set_module(ch);
    return ch;
  };
  std::vector<Chain> chains;
  for (const auto& [start, _] : next) {
    if (prev.count(start)) continue;
    std::vector<int> ids;
    std::set<int> seen;
    for (int i = start; seen.insert(i).second;) {
      ids.push_back(i);
      auto it = next.find(i);
      if (it == next.end()) break;
      i = it->second;
    }
    if (ids.size() < 2) continue;
    Chain whole = chain_of(ids);
    if (!whole.whole_forward) {
      // A chain across modules: each longest run of it that is one module's
      // whole forward is a chain too (a kernel for it can stand in for the forward).
      for (size_t a = 0; a + 1 < ids.size();) {
        size_t best = 0;
        for (size_t b = ids.size(); b >= a + 2 && !best; --b)
          if (b - a < ids.size() &&
              chain_of(std::vector<int>(ids.begin() + static_cast<long>(a), ids.begin() + static_cast<long>(b))).whole_forward)
            best = b;
        if (!best) {
          ++a;
          continue;
        }
        chains.push_back(chain_of(std::vector<int>(ids.begin() + static_cast<long>(a), ids.begin() + static_cast<long>(best))));
        a = best;
      }
    }
    chains.push_back(std::move(whole));
  }
  // A run inside a module class's whole forward is that forward's chain.
  std::vector<Chain> forward = find_forward_chains(record, backend);
  std::erase_if(chains, [&](const Chain& c) {
    for (const Chain& f : forward)
      if (std::all_of(c.entries.begin(), c.entries.end(),
                      [&](int i) { return std::find(f.entries.begin(), f.entries.end(), i) != f.entries.end(); }))
        return true;
    return false;
  });
  for (Chain& f : forward) chains.push_back(std::move(f));
  std::sort(chains.begin(), chains.end(), [](const Chain& x, const Chain& y) {
    return x.time_us != y.time_us ? x.time_us > y.time_us : x.entries < y.entries;
  });
  return chains;
}

json chain_json(const Chain& c, const std::string& model, double op_time_us) {
  return {{"model", model},
          {"ops", c.ops},
          {"signatures", c.signatures},
          {"calls", c.calls},
          {"time_us", c.time_us},
          {"share", op_time_us > 0 ? c.time_us / op_time_us : 0.0},
          {"module", c.module.empty() ? json(nullptr) : json(c.module)},
          {"whole_forward", c.whole_forward},
          {"searched", false},
          {"why", "found in the capture's data flow; `forge try` verifies a kernel for it (its id)"}};
}

}  // namespace forge
