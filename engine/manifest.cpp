#include "engine/manifest.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string_view>

#include "util/error.h"
#include "util/strings.h"

namespace forge {
namespace {

namespace fs = std::filesystem;

// The known keys of every mapping, by where they sit. Besides validation this
// lets an unknown key say where it belongs ("'iterations' belongs under
// 'budget'") when it is right but misplaced.
struct Section {
  std::string_view name;  // "" = the top level
  std::vector<std::string> keys;
};

const std::vector<Section>& sections() {
  static const std::vector<Section> all = {
      {"",
       {"version", "models", "targets", "budget", "device", "capture", "proposer", "history",
        "store", "executor", "slurm", "cache"}},
      {"models.NAME", {"run", "torchscript", "inputs", "workdir", "env", "latency", "check_runs", "compile_env"}},
      {"targets", {"ops", "top", "min_share", "chains"}},
      {"budget", {"iterations", "seconds", "parallel", "build_seconds"}},
      {"device", {"backend", "arch"}},
      {"capture", {"samples_per_target", "max_input_mb_per_model", "timeout_seconds"}},
      {"proposer", {"strategies", "llm"}},
      {"proposer.llm", {"provider", "model", "base_url", "api_key_env", "command", "price_in", "price_out",
        "variants", "max_tokens", "temperature", "timeout_seconds", "concurrency", "chains"}},
      {"history", {"ref", "repo"}},
      {"slurm", {"partition", "account", "time_limit", "gres", "max_parallel", "retries",
                 "poll_seconds"}},
      {"cache", {"url", "timeout_seconds"}},
  };
  return all;
}

const Section& section(std::string_view name) {
  for (const auto& s : sections()) {
    if (s.name == name) return s;
  }
  throw std::logic_error("manifest: no section " + std::string(name));
}

// A key of a mapping that passed the key checks, with its value.
struct Entry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
};
using Entries = std::vector<Entry>;

const Entry* find(const Entries& entries, std::string_view key) {
  for (const auto& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

// yaml-cpp copes with CRLF but not with a lone CR (which YAML counts as a line
// break), and skips a BOM without counting it in columns. Normalizing first
// makes its line/column agree with the lines we echo.
std::string normalized(std::string_view raw) {
  if (raw.substr(0, 3) == "\xEF\xBB\xBF") raw.remove_prefix(3);
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\r') {
      out += raw[i];
    } else if (i + 1 >= raw.size() || raw[i + 1] != '\n') {
      out += '\n';
    }
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

bool is_utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// How a value reads in "got ..." messages.
std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  return "nothing";
}

// One- and two-letter words get one edit, so that "e" does not suggest "env".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.empty()) return "";
  size_t max_distance = word.size() <= 2 ? 1 : 2;
  std::string match = closest_match(word, candidates, max_distance);
  return match.empty() ? "" : " (did you mean '" + match + "'?)";
}

std::string join(const std::vector<std::string>& words, std::string_view sep) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += sep;
    out += w;
  }
  return out;
}

bool matches_charset(std::string_view s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
  });
}

bool is_env_name(std::string_view s) {
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') && matches_charset(s, "_");
}

// sm_NN or sm_NNa (sm_80, sm_90a, sm_100a).
bool is_cuda_arch(std::string_view s) {
  if (s.substr(0, 3) != "sm_") return false;
  s.remove_prefix(3);
  if (!s.empty() && s.back() == 'a') s.remove_suffix(1);
  return s.size() >= 2 && s.size() <= 3 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The parts of git's check-ref-format that a hand-written ref can get wrong.
bool is_git_ref(std::string_view s) {
  if (s.substr(0, 5) != "refs/" || s.size() == 5) return false;
  if (s.back() == '/' || s.back() == '.' || s.ends_with(".lock")) return false;
  if (s.find("..") != std::string_view::npos || s.find("//") != std::string_view::npos ||
      s.find("@{") != std::string_view::npos || s.find("/.") != std::string_view::npos) {
    return false;
  }
  return std::none_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) <= ' ' || c == 0x7f ||
           std::string_view("~^:?*[\\").find(c) != std::string_view::npos;
  });
}

std::optional<int> parse_non_negative_int(std::string_view s) {
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || s[0] == '-' || ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> parse_finite(std::string_view s) {
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// Parses one manifest. Every check throws ManifestError at the node to blame.
class ManifestParser {
 public:
  ManifestParser(const std::string& text, const fs::path& path)
      : m_text(normalized(text)), m_lines(split_lines(m_text)), m_display(path.string()) {
    m_result.path = fs::absolute(path).lexically_normal();
    m_result.dir = m_result.path.parent_path();
  }

  Manifest parse() {
    YAML::Node root = load_document();
    if (!root.IsDefined() || root.IsNull()) fail_at(0, 0, "'models' is required");
    if (!root.IsMap()) {
      fail(root, "the top level must be a map, e.g. models: {NAME: {run: COMMAND}}");
    }
    Entries top = entries(root, &section(""));

    if (const Entry* e = find(top, "version")) {
      if (!e->value.IsScalar() || e->value.Scalar() != "1") {
        fail(where(*e), "'version' must be 1, got " + describe(e->value));
      }
    }
    const Entry* models = find(top, "models");
    if (!models) fail(root, "'models' is required");
    parse_models(*models);

    if (const Entry* e = find(top, "targets")) parse_targets(*e);
    if (const Entry* e = find(top, "budget")) parse_budget(*e);
    if (const Entry* e = find(top, "device")) parse_device(*e);
    if (const Entry* e = find(top, "capture")) parse_capture(*e);
    if (const Entry* e = find(top, "proposer")) parse_proposer(*e);
    if (const Entry* e = find(top, "history")) parse_history(*e);
    m_result.store = m_result.dir / ".forge";
    if (const Entry* e = find(top, "store")) m_result.store = path_value(*e);
    if (const Entry* e = find(top, "executor")) m_result.executor = choice(*e, {"local", "slurm"});
    if (const Entry* e = find(top, "slurm")) parse_slurm(*e);
    if (const Entry* e = find(top, "cache")) parse_cache(*e);
    return std::move(m_result);
  }

 private:
  // --- Locating and reporting ---------------------------------------------

  [[noreturn]] void fail_at(int line, int column, const std::string& message) const {
    line = std::clamp(line, 0, static_cast<int>(m_lines.size()) - 1);
    const std::string& source = m_lines[line];
    size_t byte_column = std::min<size_t>(std::max(column, 0), source.size());
    // yaml-cpp counts bytes; people count characters. Tabs stay tabs in the
    // caret line so that the caret lines up however the terminal shows them.
    std::string pad;
    for (size_t i = 0; i < byte_column; ++i) {
      if (is_utf8_continuation(source[i])) continue;
      pad += source[i] == '\t' ? '\t' : ' ';
    }
    throw ManifestError(m_display + ":" + std::to_string(line + 1) + ":" +
                        std::to_string(pad.size() + 1) + ": " + message + "\n" + source + "\n" +
                        pad + "^");
  }

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    fail_at(mark.line, mark.column, message);
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    fail(node.Mark(), message);
  }

  // Where a bad value is: the value itself, or its key when the value is
  // empty (yaml-cpp places an empty value at the next token, often the next line).
  static YAML::Mark where(const Entry& e) {
    if (e.value.IsDefined() && !e.value.IsNull() && e.value.Mark().line >= 0) {
      return e.value.Mark();
    }
    return e.key_node.Mark();
  }

  // --- Loading --------------------------------------------------------------

  YAML::Node load_document() const {
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAll(m_text);
    } catch (const YAML::Exception& e) {
      fail_yaml(e);
    }
    // A trailing "---" yields an empty second document; that is harmless.
    for (size_t i = 1; i < docs.size(); ++i) {
      if (!docs[i].IsNull()) fail(docs[i], "only one YAML document is allowed here");
    }
    return docs.empty() ? YAML::Node() : docs[0];
  }

  [[noreturn]] void fail_yaml(const YAML::Exception& e) const {
    int line = e.mark.line;
    int column = e.mark.column;
    if (line < 0) {  // no position: blame the end of the text
      line = static_cast<int>(m_lines.size()) - 1;
      column = static_cast<int>(m_lines.back().size());
    }
    // yaml-cpp's words for a tab in indentation ("illegal map value", ...)
    // rarely say tab, the usual cause.
    if (line < static_cast<int>(m_lines.size())) {
      const std::string& source = m_lines[line];
      size_t indent_end = source.find_first_not_of(" \t");
      size_t tab = source.find('\t');
      if (tab != std::string::npos && tab < indent_end) {
        fail_at(line, static_cast<int>(tab),
                "invalid YAML: tab in indentation (YAML indents with spaces)");
      }
    }
    fail_at(line, column, "invalid YAML: " + e.msg);
  }

  // --- Keys -------------------------------------------------------------------

  // The entries of `map` in file order, each key a plain scalar appearing once
  // (yaml-cpp 0.7 keeps duplicates silently) and, when `known` is given, one of
  // its keys.
  Entries entries(const YAML::Node& map, const Section* known) const {
    Entries out;
    // By value: yaml-cpp's iterators hand out temporaries.
    for (const auto& pair : map) {
      YAML::Node key = pair.first;
      if (!key.IsScalar()) fail(key, "a key must be a plain name, got " + describe(key));
      if (find(out, key.Scalar())) fail(key, "duplicate key '" + key.Scalar() + "'");
      if (known) check_known(key, *known);
      out.push_back({key.Scalar(), key, pair.second});
    }
    return out;
  }

  void check_known(const YAML::Node& key, const Section& known) const {
    const std::string& name = key.Scalar();
    if (std::find(known.keys.begin(), known.keys.end(), name) != known.keys.end()) return;
    std::string hint = did_you_mean(name, known.keys);
    if (hint.empty()) hint = belongs_elsewhere(name, known);
    fail(key, "unknown key '" + name + "'" + hint);
  }

  static std::string belongs_elsewhere(const std::string& name, const Section& here) {
    for (const auto& s : sections()) {
      if (&s == &here) continue;
      if (std::find(s.keys.begin(), s.keys.end(), name) == s.keys.end()) continue;
      return s.name.empty() ? " (it belongs at the top level)"
                            : " (it belongs under '" + std::string(s.name) + "')";
    }
    return "";
  }

  // --- Values -----------------------------------------------------------------

  // A section's mapping; an empty section (every line commented out) is fine.
  Entries section_entries(const Entry& e, std::string_view name) const {
    if (e.value.IsNull()) return {};
    if (!e.value.IsMap()) fail(where(e), "'" + e.key + "' must be a map");
    return entries(e.value, &section(name));
  }

  std::string string_value(const Entry& e) const {
    if (!e.value.IsScalar()) {
      fail(where(e), "'" + e.key + "' must be a string, got " + describe(e.value));
    }
    return e.value.Scalar();
  }

  std::string non_empty_string(const Entry& e) const {
    std::string s = string_value(e);
    if (s.empty()) fail(where(e), "'" + e.key + "' must not be empty");
    return s;
  }

  int non_negative_int(const Entry& e) const {
    std::optional<int> v;
    if (e.value.IsScalar()) v = parse_non_negative_int(e.value.Scalar());
    if (!v) {
      fail(where(e), "'" + e.key + "' must be a non-negative integer, got " + describe(e.value));
    }
    return *v;
  }

  enum class Range { kNonNegative, kPositive, kShare };

  double number(const Entry& e, Range range) const {
    std::optional<double> v;
    if (e.value.IsScalar()) v = parse_finite(e.value.Scalar());
    bool ok = v && (range == Range::kNonNegative ? *v >= 0
                    : range == Range::kPositive  ? *v > 0
                                                 : *v >= 0 && *v <= 1);
    if (!ok) {
      const char* what = range == Range::kNonNegative ? "a non-negative number"
                         : range == Range::kPositive  ? "a positive number"
                                                      : "a number between 0 and 1";
      fail(where(e), "'" + e.key + "' must be " + what + ", got " + describe(e.value));
    }
    return *v;
  }

  bool boolean(const Entry& e) const {
    std::string s = e.value.IsScalar() ? e.value.Scalar() : "";
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    fail(where(e), "'" + e.key + "' must be true or false, got " + describe(e.value));
  }

  std::string choice(const Entry& e, const std::vector<std::string>& options) const {
    std::string s = e.value.IsScalar() ? e.value.Scalar() : "";
    if (std::find(options.begin(), options.end(), s) != options.end()) return s;
    fail(where(e), "'" + e.key + "' must be one of " + join(options, ", ") + ", got " +
                       describe(e.value) + did_you_mean(s, options));
  }

  // Absolute: relative paths are against the manifest's folder, "~/" is $HOME.
  fs::path path_value(const Entry& e) const {
    std::string s = non_empty_string(e);
    fs::path p = s;
    const char* home = std::getenv("HOME");
    if ((s == "~" || s.starts_with("~/")) && home && *home) {
      p = fs::path(home) / s.substr(std::min<size_t>(2, s.size()));
    }
    p = (m_result.dir / p).lexically_normal();  // an absolute p replaces dir
    // "dir/." normalizes to "dir/"; drop the slash so paths compare equal.
    if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
    return p;
  }

  // --- Sections -------------------------------------------------------------

  void parse_models(const Entry& e) {
    const char* expected = "'models' must be a map of NAME: {run: COMMAND}";
    if (!e.value.IsMap() || e.value.size() == 0) fail(where(e), expected);
    for (const Entry& m : entries(e.value, nullptr)) m_result.models.push_back(parse_model(m));
  }

  ModelSpec parse_model(const Entry& e) const {
    ModelSpec model;
    model.name = e.key;
    // Names become folder and file names in the store.
    if (!matches_charset(e.key, "_.-") || e.key.empty()) {
      fail(e.key_node, "model name '" + e.key + "' may only use letters, digits, '_', '.' and '-'");
    }
    if (e.key == "." || e.key == "..") fail(e.key_node, "model name '" + e.key + "' is reserved");
    if (!e.value.IsNull() && !e.value.IsMap()) {
      fail(where(e), "model '" + e.key + "' must be a map, e.g. {run: COMMAND}");
    }
    Entries fields = e.value.IsNull() ? Entries{} : entries(e.value, &section("models.NAME"));

    const Entry* run = find(fields, "run");
    const Entry* torchscript = find(fields, "torchscript");
    const Entry* inputs = find(fields, "inputs");
    if (!run == !torchscript) {
      fail(e.key_node, "model '" + e.key + "' needs exactly one of 'run' or 'torchscript'");
    }
    if (run) {
      model.run = non_empty_string(*run);
      if (inputs) fail(inputs->key_node, "'inputs' is only allowed with 'torchscript'");
    } else {
      model.torchscript = path_value(*torchscript);
      if (!inputs) fail(e.key_node, "model '" + e.key + "' needs 'inputs' with 'torchscript'");
      model.inputs = path_value(*inputs);
    }
    model.workdir = m_result.dir;
    if (const Entry* w = find(fields, "workdir")) model.workdir = path_value(*w);
    if (const Entry* env = find(fields, "env")) model.env = parse_env(*env);
    if (const Entry* l = find(fields, "latency")) {
      model.latency = non_empty_string(*l);
      const char* expected =
          "'latency' must be a regular expression with a group capturing a number, e.g. '([0-9.]+) ms'";
      try {
        if (std::regex(model.latency).mark_count() < 1) fail(where(*l), expected);
      } catch (const std::regex_error& ex) {
        fail(where(*l), std::string(expected) + " (" + ex.what() + ")");
      }
    }
    if (const Entry* r = find(fields, "check_runs")) {
      model.check_runs = non_negative_int(*r);
      if (model.check_runs < 1) fail(where(*r), "'check_runs' must be at least 1, got " + describe(r->value));
    }
    if (const Entry* c = find(fields, "compile_env")) {
      if (!run) fail(c->key_node, "'compile_env' needs 'run': it is the environment the command runs compiled with");
      model.compile_env = parse_env(*c);
    }
    return model;
  }

  std::map<std::string, std::string> parse_env(const Entry& e) const {
    std::map<std::string, std::string> env;
    if (e.value.IsNull()) return env;
    if (!e.value.IsMap()) fail(where(e), "'" + e.key + "' must be a map");
    for (const Entry& var : entries(e.value, nullptr)) {
      if (!is_env_name(var.key)) {
        fail(var.key_node, "'" + var.key + "' is not a valid environment variable name");
      }
      // forge sets FORGE_* itself (capture, package checks, the compiled A/B's policy); a manifest
      // value would override it or be overridden, and could make both sides of an A/B the same.
      if (var.key.rfind("FORGE_", 0) == 0) {
        fail(var.key_node, "'" + var.key + "': FORGE_* variables are set by forge itself and cannot be set in '" +
                               e.key + "'");
      }
      env[var.key] = string_value(var);
    }
    return env;
  }

  void parse_targets(const Entry& e) {
    TargetSelection& t = m_result.targets;
    for (const Entry& f : section_entries(e, "targets")) {
      if (f.key == "ops") t.ops = parse_ops(f);
      if (f.key == "top") t.top = non_negative_int(f);
      if (f.key == "min_share") t.min_share = number(f, Range::kShare);
      if (f.key == "chains") t.chains = non_negative_int(f);
    }
  }

  std::vector<std::string> parse_ops(const Entry& e) const {
    std::vector<std::string> ops;
    if (e.value.IsNull()) return ops;
    if (!e.value.IsSequence()) fail(where(e), "'ops' must be a list of op names");
    for (const YAML::Node& op : e.value) {
      if (!op.IsScalar() || op.Scalar().empty()) {
        fail(op.Mark().line >= 0 ? op.Mark() : e.key_node.Mark(),
             "'ops' entries must be op names, got " + describe(op));
      }
      ops.push_back(op.Scalar());
    }
    return ops;
  }

  void parse_budget(const Entry& e) {
    Budget& b = m_result.budget;
    for (const Entry& f : section_entries(e, "budget")) {
      if (f.key == "iterations") b.iterations = non_negative_int(f);
      if (f.key == "seconds") b.seconds = number(f, Range::kNonNegative);
      if (f.key == "parallel") b.parallel = non_negative_int(f);
      if (f.key == "build_seconds") b.build_seconds = number(f, Range::kNonNegative);
    }
  }

  void parse_device(const Entry& e) {
    DeviceSpec& d = m_result.device;
    for (const Entry& f : section_entries(e, "device")) {
      if (f.key == "backend") d.backend = choice(f, {"auto", "cuda", "cpu"});
      if (f.key == "arch") {
        std::string arch = f.value.IsScalar() ? f.value.Scalar() : "";
        if (arch != "auto" && !is_cuda_arch(arch)) {
          fail(where(f), "'arch' must be auto or sm_NN (e.g. sm_90a), got " + describe(f.value));
        }
        d.arch = arch;
      }
    }
  }

  void parse_capture(const Entry& e) {
    CaptureSpec& c = m_result.capture;
    for (const Entry& f : section_entries(e, "capture")) {
      if (f.key == "samples_per_target") c.samples_per_target = non_negative_int(f);
      if (f.key == "max_input_mb_per_model") c.max_input_mb_per_model = number(f, Range::kPositive);
      if (f.key == "timeout_seconds") c.timeout_seconds = number(f, Range::kPositive);
    }
  }

  void parse_proposer(const Entry& e) {
    ProposerSpec& p = m_result.proposer;
    for (const Entry& f : section_entries(e, "proposer")) {
      if (f.key == "strategies") p.strategies = boolean(f);
      if (f.key == "llm" && !f.value.IsNull()) p.llm = parse_llm(f);
    }
  }

  LlmSpec parse_llm(const Entry& e) const {
    LlmSpec llm;
    Entries fields = section_entries(e, "proposer.llm");
    const Entry* provider = find(fields, "provider");
    if (!provider) {
      fail(e.key_node, "'llm' needs 'provider' (one of openai, anthropic, gemini, command)");
    }
    llm.provider = choice(*provider, {"openai", "anthropic", "gemini", "command"});
    if (const Entry* f = find(fields, "model")) llm.model = non_empty_string(*f);
    if (const Entry* f = find(fields, "base_url")) llm.base_url = string_value(*f);
    for (const Entry& f : fields) {
      if (f.key == "price_in") llm.price_in = number(f, Range::kNonNegative);
      if (f.key == "price_out") llm.price_out = number(f, Range::kNonNegative);
      if (f.key == "variants") llm.variants = non_negative_int(f);
      if (f.key == "max_tokens") llm.max_tokens = non_negative_int(f);
      if (f.key == "temperature") llm.temperature = number(f, Range::kNonNegative);
      if (f.key == "timeout_seconds") llm.timeout_seconds = number(f, Range::kPositive);
      if (f.key == "concurrency") llm.concurrency = std::max(1, non_negative_int(f));
      if (f.key == "chains") llm.chains = boolean(f);
    }
    if (const Entry* f = find(fields, "command")) {
      if (llm.provider != "command") {
        fail(f->key_node, "'command' is only allowed with provider: command");
      }
      llm.command = non_empty_string(*f);
    }
    if (const Entry* f = find(fields, "api_key_env")) {
      llm.api_key_env = string_value(*f);
      // People paste the key itself here; do not repeat it in the message.
      if (!llm.api_key_env.empty() && !is_env_name(llm.api_key_env)) {
        fail(where(*f),
             "'api_key_env' must be the name of an environment variable (e.g. OPENAI_API_KEY), "
             "not the key itself");
      }
    } else {
      llm.api_key_env = default_api_key_env(llm.provider);
    }
    if (llm.provider == "command" && llm.command.empty()) {
      fail(e.key_node, "provider 'command' needs 'command'");
    }
    if (llm.provider != "command" && llm.model.empty()) {
      fail(e.key_node, "provider '" + llm.provider + "' needs 'model'");
    }
    return llm;
  }

  static std::string default_api_key_env(const std::string& provider) {
    if (provider == "openai") return "OPENAI_API_KEY";
    if (provider == "anthropic") return "ANTHROPIC_API_KEY";
    if (provider == "gemini") return "GEMINI_API_KEY";
    return "";  // a command brings its own credentials
  }

  void parse_history(const Entry& e) {
    HistorySpec& h = m_result.history;
    for (const Entry& f : section_entries(e, "history")) {
      if (f.key == "ref") {
        std::string ref = f.value.IsScalar() ? f.value.Scalar() : "";
        if (!is_git_ref(ref)) {
          fail(where(f),
               "'ref' must be a git ref name starting with 'refs/', got " + describe(f.value));
        }
        h.ref = ref;
      }
      if (f.key == "repo") h.repo = path_value(f);
    }
  }

  void parse_slurm(const Entry& e) {
    SlurmSpec& s = m_result.slurm;
    for (const Entry& f : section_entries(e, "slurm")) {
      if (f.key == "partition") s.partition = string_value(f);
      if (f.key == "account") s.account = string_value(f);
      if (f.key == "time_limit") s.time_limit = string_value(f);
      if (f.key == "gres") s.gres = string_value(f);
      if (f.key == "max_parallel") s.max_parallel = std::max(1, non_negative_int(f));
      if (f.key == "retries") s.retries = non_negative_int(f);
      if (f.key == "poll_seconds") s.poll_seconds = number(f, Range::kPositive);
    }
  }

  void parse_cache(const Entry& e) {
    CacheSpec& c = m_result.cache;
    for (const Entry& f : section_entries(e, "cache")) {
      if (f.key == "url") {
        c.url = string_value(f);
        if (!c.url.empty() && c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0)
          fail(where(f), "'url' must start with http:// or https://, got " + describe(f.value));
        while (!c.url.empty() && c.url.back() == '/') c.url.pop_back();
      }
      if (f.key == "timeout_seconds") c.timeout_seconds = number(f, Range::kPositive);
    }
  }

  std::string m_text;  // normalized; what yaml-cpp parses and messages echo
  std::vector<std::string> m_lines;
  std::string m_display;  // the path as the caller gave it
  Manifest m_result;
};

}  // namespace

Manifest load_manifest(const fs::path& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw Error("cannot read " + path.string() + ": " + std::strerror(errno));
  std::string text;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  // fopen succeeds on a directory; the read is what fails (EISDIR).
  int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno) throw Error("cannot read " + path.string() + ": " + std::strerror(read_errno));
  return parse_manifest(text, path);
}

Manifest parse_manifest(const std::string& text, const fs::path& path) {
  return ManifestParser(text, path).parse();
}

}  // namespace forge
