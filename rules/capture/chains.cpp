#include "rules/capture/chains.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "rules/capture/selection.h"

namespace forge {
using nlohmann::json;

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

namespace {

// An entry's op without its overload ("add_" for add_.Tensor).
std::string base_op(const json& e) {
  const std::string op = e.value("op", "");
  return op.substr(0, op.find('.'));
}

// Whether b may read a's output as argument `in` inside a chain: an in-place
// op only as its self, which it then changes as its functional op would
// return a new tensor (nothing else reads that output); never one that
// overwrites its self without reading it.
bool link_into_ok(const json& b, int in) {
  if (!in_place(b)) return true;
  const std::string base = base_op(b);
  return in == 0 && base != "fill_" && base != "zero_" && base != "copy_";
}

}  // namespace

std::string functional_spelling(const std::string& op) {
  const auto dot = op.find('.');
  std::string base = op.substr(0, dot), overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  if (base.size() < 2 || base.back() != '_' || base.compare(base.size() - 2, 2, "__") == 0) return op;
  base.pop_back();
  if (base == "pow") overload = overload == "Scalar" ? "Tensor_Scalar" : overload == "Tensor" ? "Tensor_Tensor" : overload;
  return overload.empty() ? base : base + "." + overload;
}

bool in_place(const json& e) {
  const std::string op = e.value("op", "");
  return cast_dtype(e).empty() && functional_spelling(op) != op;
}

bool chain_op_eligible(const json& e, const std::string& backend) {
  if (!cast_dtype(e).empty()) return !inherent_reason(e, backend).has_value();
  if (e.value("kind", "kernel") != "kernel") return false;
  if (is_gemm_or_conv(e.value("op", ""))) return false;
  return !inherent_reason(e, backend).has_value();
}

namespace {

// A run of linked ops: their entries in data-flow order, the links between
// them (Chain::links; empty from aggregated flows) and its calls.
struct Run {
  std::vector<int> ids;
  std::map<std::pair<int, int>, std::pair<int, int>> links;
  long calls = 0;
};

// The runs of the trace (flows.h), call by call: a read of call a's output k
// by call b links them when both entries are chain-eligible, that output is
// read once, by b, no other output of a is read, a's reads were all traced
// (a is not open) and b reads no other linked call. A run starts after any
// leading in-place calls; runs the trace's bound cut (ending at an open call,
// or starting at a call that read an open one) are not counted. Runs of the
// same entries and links are one run, their calls counted. *truncated: some
// trace reached its bound; then each run's calls are scaled up from the calls
// of its first op the trace saw to all of them (`calls_of`).
std::vector<Run> trace_runs(const json& record, const std::function<bool(int)>& eligible,
                            const std::function<bool(int, int)>& link_ok, const std::function<bool(int)>& leading_out,
                            const std::function<long(int)>& calls_of, bool* truncated) {
  std::map<std::pair<std::vector<int>, std::vector<std::tuple<int, int, int>>>, long> count;
  std::map<int, long> traced;  // entry -> its calls the traces saw
  *truncated = false;
  for (const auto& tr : record.value("traces", json::array())) {
    // Six integers per read, integer calls in open: capture.cpp's ingest kept only those.
    const json reads = tr.value("reads", json::array());
    std::set<long> open;
    for (const auto& c : tr.value("open", json::array())) open.insert(c.get<long>());
    *truncated = *truncated || tr.value("truncated", false) || !open.empty();
    std::map<std::pair<long, long>, int> uses;  // (call, out) -> reads
    std::map<long, std::set<long>> outs_read;   // call -> its outputs read
    std::map<long, int> entry_of;               // call -> entry
    std::set<long> reads_open;                  // calls that read an open call's output
    for (const auto& r : reads) {
      uses[{r[0].get<long>(), r[2].get<long>()}]++;
      outs_read[r[0].get<long>()].insert(r[2].get<long>());
      entry_of[r[0].get<long>()] = r[1].get<int>();
      entry_of[r[3].get<long>()] = r[4].get<int>();
      if (open.count(r[0].get<long>())) reads_open.insert(r[3].get<long>());
    }
    for (const auto& [call, e] : entry_of) traced[e]++;
    struct Link {
      long to;
      int in, out;
    };
    std::map<long, Link> next;        // a -> its one linked reader
    std::map<long, int> predecessors;  // b -> linked calls it reads
    for (const auto& r : reads) {
      const long a = r[0].get<long>(), b = r[3].get<long>(), out = r[2].get<long>();
      if (a == b || open.count(a) || uses[{a, out}] != 1 || outs_read[a].size() != 1) continue;
      if (!eligible(r[1].get<int>()) || !eligible(r[4].get<int>()) || !link_ok(r[4].get<int>(), r[5].get<int>())) continue;
      next[a] = {b, r[5].get<int>(), static_cast<int>(out)};
      predecessors[b]++;
    }
    std::erase_if(next, [&](const auto& kv) { return predecessors[kv.second.to] != 1; });
    std::set<long> linked_to;
    for (const auto& [a, l] : next) linked_to.insert(l.to);
    for (const auto& [start, _] : next) {
      if (linked_to.count(start) || reads_open.count(start)) continue;
      long first = start;
      auto it = next.find(first);
      while (it != next.end() && leading_out(entry_of[first])) {
        first = it->second.to;
        it = next.find(first);
      }
      if (it == next.end()) continue;  // one call left (or none): no run
      std::vector<int> ids{entry_of[first]};
      std::vector<std::tuple<int, int, int>> links;  // (op, input, producer's output)
      long last = first;
      for (; it != next.end(); it = next.find(it->second.to)) {
        links.emplace_back(static_cast<int>(ids.size()), it->second.in, it->second.out);
        ids.push_back(entry_of[it->second.to]);
        last = it->second.to;
      }
      if (open.count(last)) continue;  // its successor is unknown
      count[{ids, links}]++;
    }
  }
  // A run that goes on past another's last op in some calls (a model's last
  // block into the script's loss) is that run in those calls too: its calls
  // count for the shorter one, and it is no chain of its own where it ran
  // no more often than the shorter one ran alone.
  std::map<std::pair<std::vector<int>, std::vector<std::tuple<int, int, int>>>, long> total = count;
  std::set<std::pair<std::vector<int>, std::vector<std::tuple<int, int, int>>>> rarer;
  for (const auto& [key, n] : count)
    for (size_t len = 2; len < key.first.size(); ++len) {
      const auto prefix = std::make_pair(std::vector<int>(key.first.begin(), key.first.begin() + static_cast<long>(len)),
                                         std::vector<std::tuple<int, int, int>>(key.second.begin(),
                                                                                key.second.begin() + static_cast<long>(len - 1)));
      auto it = count.find(prefix);
      if (it == count.end()) continue;
      total[prefix] += n;
      if (it->second >= n) rarer.insert(key);
    }
  std::vector<Run> runs;
  for (const auto& [key, n] : total) {
    if (rarer.count(key)) continue;
    Run r;
    r.ids = key.first;
    for (const auto& [j, in, out] : key.second) r.links[{j, in}] = {j - 1, out};
    r.calls = n;
    const int head = r.ids.front();
    if (*truncated && traced[head] > 0 && calls_of(head) > traced[head])
      r.calls = std::llround(static_cast<double>(n) * static_cast<double>(calls_of(head)) / static_cast<double>(traced[head]));
    runs.push_back(std::move(r));
  }
  return runs;
}

// The runs of the flows aggregated by entry: a link a -> b where every call
// of a and of b is linked, a's output k produced and read exactly that often,
// by b alone, and no other output of a read; a node's one successor, a node's
// one predecessor. A run starts after any leading in-place ops.
std::vector<Run> flow_runs(const json& record, const std::function<bool(int)>& eligible,
                           const std::function<bool(int, int)>& link_ok, const std::function<bool(int)>& leading_out) {
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
  std::map<int, std::set<int>> into, out_of;
  for (const auto& f : record.value("flows", json::array())) {
    const int a = f.value("from", -1), b = f.value("to", -1);
    const long k = f.value("out", 0L), c = f.value("calls", 0L);
    if (a < 0 || b < 0 || a >= n || b >= n || a == b || c <= 0) continue;
    if (!eligible(a) || !eligible(b) || !link_ok(b, f.value("in", 0))) continue;
    if (c != calls_of(a) || c != calls_of(b)) continue;
    if (produced[{a, k}] != c || consumed[{a, k}] != c || consumed_any[a] != c) continue;
    out_of[a].insert(b);
    into[b].insert(a);
  }
  std::map<int, int> next, prev;
  for (const auto& [a, bs] : out_of)
    if (bs.size() == 1 && into[*bs.begin()].size() == 1) {
      next[a] = *bs.begin();
      prev[*bs.begin()] = a;
    }
  std::vector<Run> runs;
  for (const auto& [start, _] : next) {
    if (prev.count(start)) continue;
    Run r;
    std::set<int> seen;
    for (int i = start; seen.insert(i).second;) {
      if (!r.ids.empty() || !leading_out(i)) r.ids.push_back(i);
      auto it = next.find(i);
      if (it == next.end()) break;
      i = it->second;
    }
    r.calls = calls_of(start);
    runs.push_back(std::move(r));
  }
  return runs;
}

bool has_trace(const json& record) {
  for (const auto& tr : record.value("traces", json::array()))
    if (!tr.value("reads", json::array()).empty()) return true;
  return false;
}

}  // namespace

std::vector<Chain> find_chains(const json& record, const std::string& backend) {
  const json& entries = record.contains("entries") ? record["entries"] : json::array();
  const int n = static_cast<int>(entries.size());
  auto calls_of = [&](int i) { return entries[static_cast<size_t>(i)].value("calls", 0L); };
  auto eligible = [&](int i) { return i >= 0 && i < n && chain_op_eligible(entries[static_cast<size_t>(i)], backend); };
  auto link_ok = [&](int b, int in) { return link_into_ok(entries[static_cast<size_t>(b)], in); };
  // A run never starts with an in-place op: it would change a tensor from
  // outside the chain, which a fused kernel writing a new output does not.
  auto leading_out = [&](int i) { return in_place(entries[static_cast<size_t>(i)]); };
  std::vector<Run> runs;
  if (has_trace(record)) {
    bool truncated = false;
    runs = trace_runs(record, eligible, link_ok, leading_out, calls_of, &truncated);
    // A trace cut at its bound may miss what ran after it (a forward that
    // starts late): runs every call of which links by the aggregated flows too.
    if (truncated)
      for (Run& r : flow_runs(record, eligible, link_ok, leading_out))
        if (std::none_of(runs.begin(), runs.end(), [&](const Run& t) { return t.ids == r.ids; })) runs.push_back(std::move(r));
  } else {
    runs = flow_runs(record, eligible, link_ok, leading_out);
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
  // Ops [a, b) of a run as a chain; its time is its calls' share of each op's.
  auto chain_of = [&](const Run& r, size_t a, size_t b) {
    Chain ch;
    for (size_t j = a; j < b; ++j) {
      const int i = r.ids[j];
      append_entry(ch, i, entries[static_cast<size_t>(i)]);
      if (calls_of(i) > 0 && r.calls < calls_of(i))
        ch.time_us -= entries[static_cast<size_t>(i)].value("time_us", 0.0) * (1 - double(r.calls) / calls_of(i));
    }
    for (const auto& [to, from] : r.links)
      if (to.first >= static_cast<int>(a) && to.first < static_cast<int>(b) && from.first >= static_cast<int>(a))
        ch.links[{to.first - static_cast<int>(a), to.second}] = {from.first - static_cast<int>(a), from.second};
    ch.calls = r.calls;
    set_module(ch);
    return ch;
  };
  std::vector<Chain> chains;
  for (const Run& r : runs) {
    const size_t len = r.ids.size();
    if (len < 2) continue;
    Chain whole = chain_of(r, 0, len);
    if (!whole.whole_forward) {
      // A chain across modules: each longest run of it that is one module's
      // whole forward is a chain too (a kernel for it can stand in for the forward).
      for (size_t a = 0; a + 1 < len;) {
        if (leading_out(r.ids[a])) {
          ++a;
          continue;
        }
        size_t best = 0;
        for (size_t b = len; b >= a + 2 && !best; --b)
          if (b - a < len && chain_of(r, a, b).whole_forward) best = b;
        if (!best) {
          ++a;
          continue;
        }
        chains.push_back(chain_of(r, a, best));
        a = best;
      }
    }
    chains.push_back(std::move(whole));
  }
  // One chain per ops and links (a module's forward cut from several runs,
  // a run found once per side of a trimmed in-place op): their calls add up.
  std::vector<Chain> merged;
  for (Chain& c : chains) {
    auto same = std::find_if(merged.begin(), merged.end(),
                             [&](const Chain& m) { return m.entries == c.entries && m.links == c.links; });
    if (same == merged.end()) {
      merged.push_back(std::move(c));
      continue;
    }
    same->calls += c.calls;
    same->time_us += c.time_us;
  }
  chains = std::move(merged);
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
