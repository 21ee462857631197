#include "rules/evaluate/family.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <regex>

#include "runtime/common/abi_args.h"
#include "runtime/common/dtypes.h"
#include "runtime/common/signature_family.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class FamilyError {
 public:
  explicit FamilyError(fs::path path) : m_path(std::move(path)) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw Error(m_path.string() + ": " + message);
  }
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    const YAML::Mark m = node.Mark();
    if (m.line < 0) fail(message);
    throw Error(m_path.string() + ":" + std::to_string(m.line + 1) + ":" +
                std::to_string(m.column + 1) + ": " + message);
  }

 private:
  fs::path m_path;
};

// A plain (unquoted) YAML scalar as the JSON value it means (YAML 1.2 core schema).
json plain_scalar(const std::string& s) {
  static const std::regex integer(R"(^[-+]?[0-9]+$)");
  static const std::regex real(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, integer)) {
    try {
      return std::stoll(s);
    } catch (const std::exception&) {
      return std::stod(s);  // out of int64 range
    }
  }
  if (std::regex_match(s, real)) return std::stod(s);
  return s;
}

json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // Quoted scalars carry the non-specific tag "!": always strings.
      return node.Tag() == "!" ? json(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : node) a.push_back(to_json(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : node) o[kv.first.Scalar()] = to_json(kv.second);
      return o;
    }
  }
  return nullptr;
}

bool is_number(const YAML::Node& n) {
  return n.IsScalar() && n.Tag() != "!" && plain_scalar(n.Scalar()).is_number();
}

void validate(const YAML::Node& root, const fs::path& path, const FamilyError& err, bool in_folder) {
  if (!root.IsMap()) err.fail("a family file is a mapping (name, ops, verify, tolerance, cost)");
  const YAML::Node name = root["name"];
  if (!name || !name.IsScalar() || name.Scalar().empty())
    err.fail("missing 'name' (the family's name, e.g. softmax)");
  const std::string folder = path.parent_path().filename().string();
  if (in_folder && name.Scalar() != folder)
    err.fail(name, "name '" + name.Scalar() + "' differs from its folder '" + folder + "'");

  const YAML::Node ops = root["ops"];
  if (!ops) err.fail("missing 'ops' (the backend ops this family covers, e.g. [_softmax])");
  if (!ops.IsSequence() || ops.size() == 0)
    err.fail(ops, "'ops' must be a non-empty list of backend op names");
  for (const auto& op : ops)
    if (!op.IsScalar() || op.Scalar().empty())
      err.fail(op, "'ops' entries must be op names such as _softmax or mean.dim");

  const YAML::Node tol = root["tolerance"];
  if (!tol) err.fail("missing 'tolerance' (per dtype: {atol, rtol})");
  if (!tol.IsMap() || tol.size() == 0)
    err.fail(tol, "'tolerance' must map dtypes to {atol: X, rtol: Y}");
  for (const auto& kv : tol) {
    const std::string dtype = kv.first.Scalar();
    if (!dtypes::in_abi(dtype)) err.fail(kv.first, "unknown dtype '" + dtype + "' in 'tolerance'");
    if (!kv.second.IsMap()) err.fail(kv.second, "tolerance." + dtype + " must be {atol, rtol}");
    for (const char* k : {"atol", "rtol"}) {
      const YAML::Node v = kv.second[k];
      if (!v) err.fail(kv.second, "tolerance." + dtype + " needs '" + k + "'");
      if (!is_number(v) || plain_scalar(v.Scalar()).get<double>() < 0)
        err.fail(v, "tolerance." + dtype + "." + k + " must be a non-negative number");
    }
  }

  if (const YAML::Node verify = root["verify"]) {
    if (!verify.IsMap()) err.fail(verify, "'verify' must be a mapping");
    if (const YAML::Node sizes = verify["edge_sizes"]) {
      if (!sizes.IsSequence()) err.fail(sizes, "verify.edge_sizes must be a list of sizes");
      for (const auto& s : sizes) {
        json v = is_number(s) ? plain_scalar(s.Scalar()) : json();
        if (!v.is_number_integer() || v.get<long long>() < 1)
          err.fail(s, "verify.edge_sizes entries must be positive integers");
      }
    }
    if (const YAML::Node ranges = verify["ranges"]) {
      if (!ranges.IsSequence()) err.fail(ranges, "verify.ranges must be a list of [low, high]");
      for (const auto& r : ranges) {
        if (!r.IsSequence() || r.size() != 2 || !is_number(r[0]) || !is_number(r[1]) ||
            plain_scalar(r[0].Scalar()).get<double>() >= plain_scalar(r[1].Scalar()).get<double>())
          err.fail(r, "verify.ranges entries must be [low, high] with low < high");
      }
    }
    if (const YAML::Node seeds = verify["seeds"]) {
      json v = is_number(seeds) ? plain_scalar(seeds.Scalar()) : json();
      if (!v.is_number_integer() || v.get<long long>() < 0)
        err.fail(seeds, "verify.seeds must be a non-negative integer");
    }
    if (const YAML::Node share = verify["max_declined"]) {
      json v = is_number(share) ? plain_scalar(share.Scalar()) : json();
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
        err.fail(share, "verify.max_declined must be a share of the cases, 0 to 1");
    }
    if (const YAML::Node specials = verify["specials"]) {
      if (!specials.IsSequence()) err.fail(specials, "verify.specials must be a list of names");
    }
    if (const YAML::Node keep = verify["keep_args"]) {
      if (!keep.IsSequence()) err.fail(keep, "verify.keep_args must be a list of argument indices");
      for (const auto& k : keep) {
        json v = is_number(k) ? plain_scalar(k.Scalar()) : json();
        if (!v.is_number_integer() || v.get<long long>() < 0)
          err.fail(k, "verify.keep_args entries must be argument indices (non-negative integers)");
      }
    }
  }
  // The worker's second chance against float64 (runtime/worker/compare.h).
  if (const YAML::Node c = root["compare_float64"];
      c && !(c.IsScalar() && c.Tag() != "!" && plain_scalar(c.Scalar()).is_boolean()))
    err.fail(c, "compare_float64 must be true or false");
  for (const char* section : {"signature_family", "cost"})
    if (const YAML::Node n = root[section]; n && !n.IsMap())
      err.fail(n, std::string("'") + section + "' must be a mapping");
  // The rule the worker and the package guard read (runtime/common/signature_family.h).
  if (const YAML::Node sf = root["signature_family"]) {
    std::string why;
    try {
      why = family::problem(family::parse(to_json(sf)));
    } catch (const json::exception& e) {
      why = "malformed (vary: [{arg, dim}], pins: [{arg, vary}], contiguous: bool, vary_outputs: [k]): " +
            std::string(e.what());
    }
    if (!why.empty()) err.fail(sf, "signature_family: " + why);
  }
}

}  // namespace

fs::path default_targets_dir() {
  return fs::path(FORGE_SOURCE_DIR) / "targets";
}

namespace {

// A family from its YAML text; `file` names it in errors (and is its path).
Family family_from_text(const std::string& text, const fs::path& file, bool in_folder) {
  FamilyError err(file);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(file.string() + ":" + std::to_string(e.mark.line + 1) + ":" +
                std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  validate(root, file, err, in_folder);
  Family f;
  f.name = root["name"].Scalar();
  f.path = file;
  f.spec = to_json(root);
  f.text = text;
  f.digest = sha256_hex(text);
  for (const auto& op : root["ops"]) f.ops.push_back(op.Scalar());
  return f;
}

bool is_tensor(const json& rec) { return rec.is_object() && rec.value("type", "") == "Tensor"; }

// Row-major contiguous, as torch's is_contiguous (dims of extent 1 take any stride).
bool is_contiguous(const json& rec) {
  const auto sizes = rec.value("sizes", std::vector<int64_t>{});
  const auto strides = rec.value("strides", std::vector<int64_t>{});
  if (sizes.size() != strides.size()) return false;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool is_floating(const json& rec) {
  const std::string d = rec.value("dtype", "");
  return d == "float32" || d == "float64" || d == "float16" || d == "bfloat16";
}

}  // namespace

Family load_family(const fs::path& file) {
  std::string text;
  if (!read_file(file, &text)) FamilyError(file).fail("cannot read the file");
  return family_from_text(text, file, /*in_folder=*/true);
}

Family derive_family(const Target& t) {
  bool contiguous = true, floating = false;
  std::string reads, writes;
  for (size_t i = 0; i < t.args.size(); ++i) {
    const json& a = t.args[i];
    if (!is_tensor(a)) continue;
    contiguous = contiguous && is_contiguous(a);
    floating = floating || is_floating(a);
    reads += (reads.empty() ? "" : ", ") + std::to_string(i);
  }
  for (size_t k = 0; k < t.outputs.size(); ++k)
    if (is_tensor(t.outputs[k])) writes += (writes.empty() ? "" : ", ") + std::to_string(k);
  // Inputs the call changes (the capture saw it, or the schema says so):
  // inputs stay read-only, the kernel returns their new values
  // (docs/CANDIDATE_ABI.md, "Changed inputs").
  std::string changes;
  for (size_t i = 0; i < t.args.size(); ++i)
    if (is_tensor(t.args[i]) && t.args[i].value("changed", false))
      changes += "#   input " + std::to_string(i) + " (" + t.args[i].value("name", std::string("?")) + ")\n";
  if (!changes.empty())
    changes = "# The call changes these inputs. Inputs are read-only to a kernel: it returns\n"
              "# each one's new value, as the return that is that input (an in-place op's\n"
              "# self) or else as an extra output after the op's returns, in argument order:\n" +
              changes;
  // A chain target (rules/capture/chain_target.h): what the fused kernel computes.
  std::string chain_text, keep;
  if (t.chain.is_object()) {
    chain_text = "# A chain of ATen ops, run one by one as the stock reference; the kernel computes\n"
                 "# them fused. Inputs are the tensors the chain reads from outside, in order (a\n"
                 "# tensor two ops read is one input where it was one tensor in every captured\n"
                 "# call); outputs are the last op's returns the program reads. Python numbers (0-dim float64 or\n"
                 "# int64 inputs on the CPU: eps, factors) keep their captured value in fresh\n"
                 "# cases (verify.keep_args): a random eps would make the math ill-conditioned.\n";
    for (size_t i = 0; i < t.args.size(); ++i) {
      const json& a = t.args[i];
      const std::string dt = a.value("dtype", "");
      if (is_tensor(a) && a.value("sizes", json::array()).empty() && (dt == "float64" || dt == "int64") &&
          a.value("device", "cpu") == "cpu")
        keep += (keep.empty() ? "" : ", ") + std::to_string(i);
    }
    int k = 0;
    for (const auto& o : t.chain.value("ops", json::array())) {
      std::string args;
      for (const auto& a : o.value("args", json::array())) {
        std::string v;
        if (a.contains("ref")) {
          const json& r = a["ref"];
          v = r.contains("input") ? "input " + std::to_string(r.value("input", 0))
                                  : "op" + std::to_string(r.value("op", 0)) + " return " + std::to_string(r.value("output", 0));
        } else {
          v = a.contains("value") ? a["value"].dump() : a.value("type", std::string("?"));
        }
        args += (args.empty() ? "" : ", ") + v;
      }
      const std::string ov = o.value("overload", "");
      chain_text += "#   op" + std::to_string(k++) + " = " + o.value("op", "") + (ov.empty() ? "" : "." + ov) + "(" +
                    args + ")\n";
    }
  }
  // Written as a family.yaml would be and read by the same validator, so a
  // derived family is shown (to people and to the model) as the file it stands for.
  std::string text =
      "# " + t.op + ", derived from the captured call: no targets/<family>/family.yaml covers this op.\n"
      "# The signature as captured (no dimension varies; a non-contiguous input fixes\n"
      "# its strides), outputs as the stock kernel returns them, verified against\n"
      "# stock on the captured samples and on fresh inputs of each range below\n"
      "# (integer inputs: the captured values' range), tolerances by dtype.\n" +
      chain_text + changes +
      "name: \"" + t.op + "\"\n"
      "ops: [\"" + t.op + "\"]\n"
      "derived: true\n"
      "signature_family:\n"
      "  contiguous: " + (contiguous ? "true" : "false") + "\n"
      "verify:\n"
      "  ranges: [[-3, 3], [-100, 100]]\n"
      "  seeds: 2\n" +
      (floating ? "  specials: [nan, pos_inf]\n" : "") + (keep.empty() ? "" : "  keep_args: [" + keep + "]\n") +
      "# The float32 tolerance is wider than a hand-tuned family's (1e-6/1e-5): a\n"
      "# derived family knows nothing of the op's summation order; precision cheats\n"
      "# meet the worker's float64 accuracy check all the same.\n"
      "tolerance:\n"
      "  float32: {atol: 1.0e-5, rtol: 1.0e-4}\n"
      "  float64: {atol: 1.0e-12, rtol: 1.0e-10}\n"
      "  float16: {atol: 1.0e-3, rtol: 1.0e-3}\n"
      "  bfloat16: {atol: 4.0e-3, rtol: 1.6e-2}\n"
      "cost: {reads: [" + reads + "], writes: [" + writes + "]}\n" +
      (t.chain.is_object()
           ? "# The stock chain rounds every intermediate to its dtype; a fused kernel nearer\n"
             "# the float64 chain than that is not wrong (compare.h's second chance).\n"
             "compare_float64: true\n"
           : "");
  Family f = family_from_text(text, "derived family of " + t.op, /*in_folder=*/false);
  f.path.clear();
  f.derived = true;
  return f;
}

std::optional<Family> family_of(const std::vector<Family>& families, const Target& t, std::string* why_not) {
  if (std::string p = abi::call_problem(t.args, t.outputs); !p.empty()) {
    if (why_not) *why_not = "the candidate ABI cannot express the call: " + p;
    return std::nullopt;
  }
  if (auto f = find_family(families, t.op)) {
    // The captured layout is part of the signature: a family written for
    // contiguous calls keeps a strided call's strides exactly.
    bool contiguous = true;
    for (const auto& a : t.args)
      if (is_tensor(a)) contiguous = contiguous && is_contiguous(a);
    if (!contiguous && f->spec.value("signature_family", json::object()).value("contiguous", true)) {
      f->spec["signature_family"]["contiguous"] = false;
      f->text += "\n# forge: this call's input is not contiguous, so its strides are part of the\n"
                 "# signature here (signature_family.contiguous: false).\n";
      f->digest = sha256_hex(f->text);
    }
    return f;
  }
  return derive_family(t);
}

std::vector<Family> load_families(const fs::path& root) {
  std::vector<Family> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && fs::is_regular_file(e.path() / "family.yaml"))
      files.push_back(e.path() / "family.yaml");
  std::sort(files.begin(), files.end());
  std::map<std::string, fs::path> owner;  // op -> file
  for (const auto& file : files) {
    Family f = load_family(file);
    for (const auto& op : f.ops) {
      auto [it, fresh] = owner.emplace(op, file);
      if (!fresh)
        throw Error(file.string() + ": op '" + op + "' is already covered by " +
                    it->second.string());
    }
    out.push_back(std::move(f));
  }
  return out;
}

// The op exactly as a family lists it ("clamp" is the Scalar overload; the
// Tensor one, "clamp.Tensor", has another schema and so no family of clamp's).
std::optional<Family> find_family(const std::vector<Family>& families, const std::string& op) {
  for (const auto& f : families)
    if (std::find(f.ops.begin(), f.ops.end(), op) != f.ops.end()) return f;
  return std::nullopt;
}

}  // namespace forge
