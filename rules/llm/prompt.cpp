#include "rules/llm/prompt.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>

#include "rules/evaluate/family.h"
#include "rules/evaluate/static_check.h"
#include "runtime/common/dtypes.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash.h"

namespace forge::llm {
namespace fs = std::filesystem;

std::string PromptTemplates::digest() const {
  Hasher h;
  h.add("system", system).add("variant", variant).add("repair", repair);
  return h.hex();
}

fs::path default_prompts_dir() { return fs::path(FORGE_SOURCE_DIR) / "rules" / "llm" / "prompts"; }

PromptTemplates load_prompt_templates(const fs::path& dir) {
  PromptTemplates t;
  for (auto [name, out] : {std::pair{"system.md", &t.system}, std::pair{"variant.md", &t.variant},
                           std::pair{"repair.md", &t.repair}})
    if (!read_file(dir / name, out))
      throw Error("cannot read the prompt template " + (dir / name).string());
  return t;
}

std::string render(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open);
    if (close == std::string::npos) break;
    const std::string name = text.substr(open + 2, close - open - 2);
    auto it = values.find(name);
    if (it == values.end()) throw Error("prompt template: no value for {{" + name + "}}");
    out += text.substr(pos, open - pos) + it->second;
    pos = close + 2;
  }
  return out + text.substr(pos);
}

std::string bounded(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  const size_t head = max_chars * 2 / 3, tail = max_chars - head;
  return text.substr(0, head) + "\n[... " + std::to_string(text.size() - head - tail) +
         " characters left out ...]\n" + text.substr(text.size() - tail);
}

namespace {

std::string num(double v, const char* fmt = "%.3g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string timing_text(const Timing& t) {
  return num(t.median) + " ± " + num(t.spread, "%.2g") + " us";
}

std::string device_text(const PromptFacts& f) {
  std::string s = std::string(f.cuda ? "CUDA GPU" : "CPU") + ": " + f.device_name + " (" + f.arch + ")";
  s += f.device_facts.empty() ? ".\n" : ". " + f.device_facts + "\n";
  s += f.cuda ? "Launch on (cudaStream_t)call->stream.\n"
              : "Your kernel runs on one thread (no OpenMP).\n";
  if (f.ceiling_bytes_per_s)
    s += "Copy ceiling (read + write, measured here" + std::string(f.cuda ? "" : ", all cores") +
         "): " + num(*f.ceiling_bytes_per_s / 1e9) + " GB/s.";
  if (f.bytes > 0) s += " This call moves " + num(f.bytes, "%.0f") + " bytes";
  if (f.floor_us > 0) s += ": bandwidth floor " + num(f.floor_us) + " us";
  if (f.bytes > 0 || f.ceiling_bytes_per_s) s += ".\n";
  if (f.stock) {
    s += "Stock, as the benchmark measures it (" + f.stock_from + "): " + timing_text(*f.stock) +
         " per cold call";
    if (f.stock_threads > 0)
      s += ", on " + std::to_string(f.stock_threads) + " thread" + (f.stock_threads > 1 ? "s" : "");
    s += ".\n";
  } else if (f.capture_us > 0) {
    s += "Stock took " + num(f.capture_us) +
         " us per call during capture (inside the model, warm; not yet benchmarked).\n";
  }
  return s;
}

std::string parent_text(const PromptFacts& f) {
  const std::string fence = f.cuda ? "cuda" : "cpp";
  if (f.parent_source.empty()) {
    std::string s = "From scratch: the parent is " + f.parent_what + ".\n";
    if (!f.example_source.empty())
      s += "A kernel from forge's library showing the ABI in use (yours should be faster):\n\n```" +
           fence + "\n" + trim_example(f.example_source, f.dtypes, f.isa) + "```\n";
    return s;
  }
  std::string s = "The parent is " + f.parent_what + ".";
  if (f.parent) s += " Measured: " + timing_text(*f.parent) + " (median ± IQR, cold)";
  if (f.parent_speedup) s += ", " + num(*f.parent_speedup) + "x stock";
  if (f.parent_floor_pct) s += ", " + num(*f.parent_floor_pct) + "% of the bandwidth floor";
  if (f.parent_hot_speedup) s += "; hot " + num(*f.parent_hot_speedup) + "x stock";
  if (f.parent || f.parent_speedup) s += ".";
  // A library kernel (a strategy's) is trimmed like the root's example.
  const std::string source = f.parent_what.rfind("strategy ", 0) == 0
                                 ? trim_example(f.parent_source, f.dtypes, f.isa)
                                 : f.parent_source;
  return s + "\n\n```" + fence + "\n" + source + "```\n";
}

std::string elsewhere_text(const PromptFacts& f) {
  if (f.elsewhere.empty()) return "";
  std::string s = "Fastest elsewhere in this tree:\n" + f.elsewhere;
  if (!f.elsewhere_source.empty())
    s += "\nThe fastest, " + f.elsewhere_what + ", beats your parent:\n\n```" +
         std::string(f.cuda ? "cuda" : "cpp") + "\n" + bounded(f.elsewhere_source, 6000) + "```\n";
  return s;
}

std::string static_rules_text(bool cuda) {
  std::string s;
  for (const auto& r : static_rules(cuda ? CandidateLang::Cuda : CandidateLang::Cpp))
    s += "- `" + std::string(r.id) + "`: " + r.rationale + "\n";
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string with_newline(std::string s) {
  if (!s.empty() && s.back() != '\n') s += '\n';
  return s;
}

// The ABI header for a prompt: its file comment out (the system prompt states
// the contract), other block comments folded to one line without the
// sentence for forge's maintainers ("... never renumber.") and kept to their
// first sentences within 160 characters, blank lines out.
std::string abi_text(const std::string& header) {
  static const char* kNote = "Values are ABI: never renumber.";
  std::string text = header;
  if (text.rfind("/*", 0) == 0 && text.find("*/") != std::string::npos)
    text = text.substr(text.find("*/") + 2);
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("/*", pos);
    if (open == std::string::npos) break;
    const size_t close = text.find("*/", open);
    if (close == std::string::npos) break;
    const std::string body = text.substr(open + 2, close - open - 2);
    std::string folded;  // newlines and " * " margins folded to one space
    for (size_t p = 0; p < body.size(); ++p) {
      if (body[p] == '\n') {
        p = body.find_first_not_of(" *", p + 1);
        if (p == std::string::npos) break;
        folded += ' ';
      }
      folded += body[p];
    }
    if (size_t n = folded.find(kNote); n != std::string::npos) folded.erase(n, std::strlen(kNote));
    while (!folded.empty() && folded.back() == ' ') folded.pop_back();
    if (folded.size() > 160) {
      size_t keep = folded.find(". ");
      for (size_t n = keep; n != std::string::npos && n < 160; n = folded.find(". ", n + 1)) keep = n;
      if (keep != std::string::npos) folded.resize(keep + 1);
    }
    out += text.substr(pos, open - pos);
    if (folded.find_first_not_of(' ') != std::string::npos) out += "/*" + folded + " */";
    pos = close + 2;
  }
  out += text.substr(pos);
  std::string lines;
  for (const std::string& l : lines_of(out))
    if (l.find_first_not_of(" \t") != std::string::npos) lines += l + "\n";
  return lines;
}

// ---- trim_example: a small preprocessor over #if groups ----

// A value that may be unknown (nullopt).
using Val = std::optional<long long>;

struct Macros {
  std::map<std::string, Val> defined;  // name -> value (nullopt: defined, value unknown)
  std::set<std::string> undefined;     // known not defined
  std::set<std::string> opaque;        // defined or not: unknown
  // Definedness: 1, 0, or -1 unknown.
  int is_defined(const std::string& n) const {
    if (defined.count(n)) return 1;
    if (undefined.count(n) || opaque.count(n)) return undefined.count(n) ? 0 : -1;
    return n.rfind("FORGE_P_", 0) == 0 ? 0 : -1;  // params: only what the header defines
  }
};

class Expr {
 public:
  Expr(const std::string& text, const Macros& m) : m_text(text), m_macros(m) {}
  Val parse() {
    Val v = ternary();
    skip();
    return m_pos == m_text.size() && !m_bad ? v : Val();
  }

 private:
  void skip() {
    while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos]))) ++m_pos;
  }
  bool eat(const char* op) {
    skip();
    const size_t n = std::strlen(op);
    if (m_text.compare(m_pos, n, op) != 0) return false;
    // "&" must not take "&&", "<" not "<<" or "<=", and so on.
    if (n == 1 && m_pos + 1 < m_text.size()) {
      const char c = m_text[m_pos + 1];
      if ((op[0] == '&' && c == '&') || (op[0] == '|' && c == '|') ||
          ((op[0] == '<' || op[0] == '>') && (c == op[0] || c == '=')) ||
          ((op[0] == '!' || op[0] == '=') && c == '='))
        return false;
    }
    m_pos += n;
    return true;
  }
  std::string ident() {
    skip();
    size_t b = m_pos;
    while (m_pos < m_text.size() &&
           (std::isalnum(static_cast<unsigned char>(m_text[m_pos])) || m_text[m_pos] == '_'))
      ++m_pos;
    return m_text.substr(b, m_pos - b);
  }
  Val ternary() {
    Val c = lor();
    if (!eat("?")) return c;
    Val a = ternary();
    if (!eat(":")) m_bad = true;
    Val b = ternary();
    if (!c) return Val();
    return *c ? a : b;
  }
  Val lor() {
    Val a = land();
    while (eat("||")) {
      Val b = land();
      if ((a && *a) || (b && *b)) a = 1;
      else if (a && b) a = 0;
      else a = Val();
    }
    return a;
  }
  Val land() {
    Val a = bor();
    while (eat("&&")) {
      Val b = bor();
      if ((a && !*a) || (b && !*b)) a = 0;
      else if (a && b) a = 1;
      else a = Val();
    }
    return a;
  }
  template <class F>
  static Val both(Val a, Val b, F f) {
    return a && b ? Val(f(*a, *b)) : Val();
  }
  Val bor() {
    Val a = bxor();
    while (eat("|")) a = both(a, bxor(), [](long long x, long long y) { return x | y; });
    return a;
  }
  Val bxor() {
    Val a = band();
    while (eat("^")) a = both(a, band(), [](long long x, long long y) { return x ^ y; });
    return a;
  }
  Val band() {
    Val a = eq();
    while (eat("&")) a = both(a, eq(), [](long long x, long long y) { return x & y; });
    return a;
  }
  Val eq() {
    Val a = rel();
    while (true) {
      if (eat("==")) a = both(a, rel(), [](long long x, long long y) { return (long long)(x == y); });
      else if (eat("!=")) a = both(a, rel(), [](long long x, long long y) { return (long long)(x != y); });
      else return a;
    }
  }
  Val rel() {
    Val a = shift();
    while (true) {
      if (eat("<=")) a = both(a, shift(), [](long long x, long long y) { return (long long)(x <= y); });
      else if (eat(">=")) a = both(a, shift(), [](long long x, long long y) { return (long long)(x >= y); });
      else if (eat("<")) a = both(a, shift(), [](long long x, long long y) { return (long long)(x < y); });
      else if (eat(">")) a = both(a, shift(), [](long long x, long long y) { return (long long)(x > y); });
      else return a;
    }
  }
  Val shift() {
    Val a = add();
    while (true) {
      if (eat("<<")) a = both(a, add(), [](long long x, long long y) { return x << y; });
      else if (eat(">>")) a = both(a, add(), [](long long x, long long y) { return x >> y; });
      else return a;
    }
  }
  Val add() {
    Val a = mul();
    while (true) {
      if (eat("+")) a = both(a, mul(), [](long long x, long long y) { return x + y; });
      else if (eat("-")) a = both(a, mul(), [](long long x, long long y) { return x - y; });
      else return a;
    }
  }
  Val mul() {
    Val a = unary();
    while (eat("*")) a = both(a, unary(), [](long long x, long long y) { return x * y; });
    return a;
  }
  Val unary() {
    if (eat("!")) {
      Val v = unary();
      return v ? Val(!*v) : Val();
    }
    if (eat("-")) {
      Val v = unary();
      return v ? Val(-*v) : Val();
    }
    if (eat("~")) {
      Val v = unary();
      return v ? Val(~*v) : Val();
    }
    return primary();
  }
  Val primary() {
    if (eat("(")) {
      Val v = ternary();
      if (!eat(")")) m_bad = true;
      return v;
    }
    skip();
    if (m_pos < m_text.size() && std::isdigit(static_cast<unsigned char>(m_text[m_pos]))) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(m_text.substr(m_pos), &used, 0);
      } catch (...) {
        m_bad = true;
        return Val();
      }
      m_pos += used;
      while (m_pos < m_text.size() && std::strchr("uUlL", m_text[m_pos])) ++m_pos;
      return v;
    }
    const std::string id = ident();
    if (id.empty()) {
      m_bad = true;
      return Val();
    }
    if (id == "defined") {
      const bool paren = eat("(");
      const std::string name = ident();
      if (paren && !eat(")")) m_bad = true;
      const int d = m_macros.is_defined(name);
      return d < 0 ? Val() : Val(d);
    }
    auto it = m_macros.defined.find(id);
    if (it != m_macros.defined.end()) return it->second;
    return m_macros.is_defined(id) == 0 ? Val(0) : Val();  // an undefined name reads 0
  }

  const std::string& m_text;
  const Macros& m_macros;
  size_t m_pos = 0;
  bool m_bad = false;
};

// The directive of a line ("if", "elif", "define"...) and the rest, or "" when none.
std::string directive(const std::string& line, std::string* rest) {
  size_t p = line.find_first_not_of(" \t");
  if (p == std::string::npos || line[p] != '#') return "";
  p = line.find_first_not_of(" \t", p + 1);
  if (p == std::string::npos) return "";
  size_t e = p;
  while (e < line.size() && std::isalpha(static_cast<unsigned char>(line[e]))) ++e;
  std::string r = line.substr(e);
  // Comments out of the condition.
  if (size_t c = r.find("/*"); c != std::string::npos) r = r.substr(0, c);
  if (size_t c = r.find("//"); c != std::string::npos) r = r.substr(0, c);
  *rest = r;
  return line.substr(p, e - p);
}

std::string resolve_conditionals(const std::string& source, Macros m) {
  struct Group {
    bool verbatim = false;  // condition unknown: the group is kept as written
    bool outer_live = true; // the enclosing region is output
    bool taking = false;    // the current branch is output
    bool done = false;      // a branch was taken
  };
  std::vector<Group> stack;
  auto live = [&] { return stack.empty() || (stack.back().outer_live && stack.back().taking); };
  auto verbatim = [&] {
    for (const auto& g : stack)
      if (g.verbatim) return true;
    return false;
  };
  std::string out;
  for (const std::string& line : lines_of(source)) {
    std::string rest;
    const std::string d = directive(line, &rest);
    const bool is_if = d == "if" || d == "ifdef" || d == "ifndef";
    if (is_if) {
      Group g;
      g.outer_live = live();
      if (!g.outer_live) {
        stack.push_back(g);
        continue;
      }
      if (verbatim()) {
        g.verbatim = true;
        g.taking = true;
        stack.push_back(g);
        out += line + "\n";
        continue;
      }
      Val v;
      if (d == "if") {
        v = Expr(rest, m).parse();
      } else {
        std::istringstream w(rest);
        std::string name;
        w >> name;
        const int def = m.is_defined(name);
        if (def >= 0) v = d == "ifdef" ? def : !def;
      }
      if (!v) {
        g.verbatim = true;
        g.taking = true;
        out += line + "\n";
      } else {
        g.taking = *v != 0;
        g.done = g.taking;
      }
      stack.push_back(g);
      continue;
    }
    if ((d == "elif" || d == "else" || d == "endif") && !stack.empty()) {
      Group& g = stack.back();
      if (d == "endif") {
        if (g.outer_live && g.verbatim) out += line + "\n";
        stack.pop_back();
        continue;
      }
      if (!g.outer_live) continue;
      if (g.verbatim) {
        out += line + "\n";
        continue;
      }
      if (d == "else") {
        g.taking = !g.done;
        g.done = true;
        continue;
      }
      if (g.done) {
        g.taking = false;
        continue;
      }
      Val v = Expr(rest, m).parse();
      if (!v) {  // every earlier branch was false: this one starts a group of its own
        g.verbatim = true;
        g.taking = true;
        out += "#if" + rest + "\n";
        continue;
      }
      g.taking = *v != 0;
      g.done = g.taking;
      continue;
    }
    if (!live()) continue;
    if (d == "define" || d == "undef") {
      std::istringstream w(rest);
      std::string name;
      w >> name;
      const size_t paren = name.find('(');
      if (paren != std::string::npos) name = name.substr(0, paren);
      if (verbatim()) {
        m.defined.erase(name);
        m.undefined.erase(name);
        m.opaque.insert(name);
      } else if (d == "undef") {
        m.defined.erase(name);
        m.undefined.insert(name);
      } else {
        std::string value;
        std::getline(w, value);
        m.undefined.erase(name);
        m.opaque.erase(name);
        m.defined[name] = paren != std::string::npos ? Val() : Expr(value, m).parse();
      }
    }
    out += line + "\n";
  }
  return out;
}

// The ISA macros g++ -march=native defines, by /proc/cpuinfo flag.
const std::vector<std::pair<const char*, const char*>> kIsaMacros = {
    {"sse4_2", "__SSE4_2__"},     {"avx", "__AVX__"},           {"avx2", "__AVX2__"},
    {"fma", "__FMA__"},           {"f16c", "__F16C__"},         {"bmi2", "__BMI2__"},
    {"avx512f", "__AVX512F__"},   {"avx512dq", "__AVX512DQ__"}, {"avx512cd", "__AVX512CD__"},
    {"avx512bw", "__AVX512BW__"}, {"avx512vl", "__AVX512VL__"}};

// Drops the definitions at file or namespace level whose first line `drop`
// selects (struct/class/typedef/using lines and directives never are): from
// that line to the end of its braces, or to its ';', with a `template <...>`
// line just before it.
template <class Pred>
std::string drop_top_level(const std::string& source, Pred drop) {
  static const std::regex namespace_open(R"(^\s*(namespace\b[^{;]*|extern\s+"C"\s*)\{\s*$)");
  static const std::regex keep(R"(^\s*(struct|class|typedef|using|#|extern\s+"C"))");
  static const std::regex template_line(R"(^\s*template\s*<.*>\s*$)");
  std::string out, held;  // held: a template line, until its definition is kept or dropped
  int depth = 0, namespaces = 0, opened = 0;
  bool dropping = false;
  for (const std::string& line : lines_of(source)) {
    if (!dropping && depth == 0 && held.empty() && std::regex_search(line, template_line)) {
      held = line + "\n";
      continue;
    }
    int delta = 0;
    for (char c : line) delta += c == '{' ? 1 : c == '}' ? -1 : 0;
    const bool ends = line.find('}') != std::string::npos || line.find(';') != std::string::npos;
    if (dropping) {
      opened += delta;
      if (opened <= 0 && ends) dropping = false;
      continue;
    }
    if (depth == 0) {
      if (std::regex_search(line, namespace_open)) {
        ++namespaces;
        out += line + "\n";
        continue;
      }
      const size_t first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line[first] == '}' && delta < 0 && namespaces > 0) {
        --namespaces;
        out += line + "\n";
        continue;
      }
      if (!std::regex_search(line, keep) && drop(line)) {
        opened = delta;
        dropping = !(opened <= 0 && ends);
        held.clear();
        continue;
      }
    }
    depth = std::max(0, depth + delta);
    out += held + line + "\n";
    held.clear();
  }
  return out + held;
}

size_t count_word(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) {
    const bool before = p > 0 && (std::isalnum(static_cast<unsigned char>(text[p - 1])) || text[p - 1] == '_');
    const size_t e = p + word.size();
    const bool after = e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_');
    n += !before && !after;
  }
  return n;
}

// The name a definition line defines: the identifier right before its first
// '(' once attributes are out ("" when there is none, e.g. `f<int>(`).
std::string defined_name(const std::string& line) {
  static const std::regex attribute(R"(__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\))");
  const std::string l = std::regex_replace(line, attribute, "");
  const size_t paren = l.find('(');
  if (paren == std::string::npos) return "";
  size_t e = paren;
  while (e > 0 && l[e - 1] == ' ') --e;
  size_t b = e;
  while (b > 0 && (std::isalnum(static_cast<unsigned char>(l[b - 1])) || l[b - 1] == '_')) --b;
  const std::string name = l.substr(b, e - b);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || name == "if" ||
      name == "for" || name == "while" || name == "switch" || name == "return" ||
      name == "sizeof" || name == "decltype" || name == "static_assert" || name == "alignas")
    return "";
  return name;
}

}  // namespace

std::string trim_example(const std::string& source, unsigned dtypes,
                         const std::vector<std::string>& isa) {
  Macros m;
  if (dtypes) m.defined["FORGE_DTYPES"] = dtypes;
  if (!isa.empty())
    for (const auto& [flag, macro] : kIsaMacros) {
      if (std::find(isa.begin(), isa.end(), flag) != isa.end())
        m.defined[macro] = 1;
      else
        m.undefined.insert(macro);
    }
  // The first paragraph of the first block comment: what the kernel does.
  std::string summary;
  if (size_t open = source.find("/*"); open != std::string::npos) {
    const size_t close = source.find("*/", open);
    std::string c = source.substr(open, close == std::string::npos ? std::string::npos : close - open);
    const size_t para = c.find("\n *\n");
    if (para != std::string::npos) c.resize(para);
    while (!c.empty() && std::isspace(static_cast<unsigned char>(c.back()))) c.pop_back();
    summary = c + " */\n";
  }
  std::string text = resolve_conditionals(blank_comments(source, /*keep_strings=*/true), m);
  std::set<std::string> unused;
  if (dtypes && !(dtypes & 4)) unused.insert({"f16", "__half", "__half2", "half", "half2"});
  if (dtypes && !(dtypes & 8))
    unused.insert({"bf16", "__nv_bfloat16", "__nv_bfloat162", "nv_bfloat16"});
  static const std::regex word(R"([A-Za-z_]\w*)");
  if (!unused.empty())
    text = drop_top_level(text, [&](const std::string& line) {
      for (auto it = std::sregex_iterator(line.begin(), line.end(), word); it != std::sregex_iterator(); ++it)
        if (unused.count(it->str())) return true;
      return false;
    });
  // Functions nothing calls (a shared block's helpers for other ops), until none is left.
  for (size_t before = 0; before != text.size();) {
    before = text.size();
    const std::string whole = text;
    text = drop_top_level(whole, [&](const std::string& line) {
      const std::string name = defined_name(line);
      return !name.empty() && name.rfind("forge_", 0) != 0 && count_word(whole, name) == 1;
    });
  }
  // Trailing blanks off, blank runs folded to nothing: comments left holes.
  std::string out = summary;
  for (std::string line : lines_of(text)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) out += line + "\n";
  }
  return out;
}

std::string trim_family_yaml(const std::string& yaml, unsigned dtypes) {
  std::string out;
  bool header = true;
  for (const std::string& line : lines_of(yaml)) {
    const size_t first = line.find_first_not_of(" \t");
    const bool comment = first != std::string::npos && line[first] == '#';
    if (!comment) header = false;
    if (comment && !header) continue;
    if (first == std::string::npos) continue;
    // An indented `<dtype>:` key (a tolerance row) of a type the signature
    // does not use; `dtypes` is the FORGE_DTYPES mask (1 << ABI code).
    bool other_dtype = false;
    if (dtypes && first > 0) {
      const size_t colon = line.find(':', first);
      const dtypes::Dtype* d =
          colon == std::string::npos ? nullptr : dtypes::find(std::string_view(line).substr(first, colon - first));
      other_dtype = d && d->abi >= 0 && !(dtypes & (1u << d->abi));
    }
    if (!other_dtype) out += line + "\n";
  }
  return out;
}

Request variant_request(const PromptTemplates& t, const PromptFacts& f) {
  const std::map<std::string, std::string> v = {
      {"lang", f.cuda ? "CUDA" : "C++ (CPU)"},
      {"fence", f.cuda ? "cuda" : "cpp"},
      {"cuda_headers", f.cuda ? " and the CUDA runtime headers" : ""},
      {"abi_header", abi_text(f.abi_header)},
      {"static_rules", static_rules_text(f.cuda)},
      {"compile_line", f.cuda ? "nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
                                "-gencode=arch=compute_XX,code=sm_XX -Xlinker -z,defs"
                              : "c++ -O3 -std=c++17 -fPIC -shared -march=native -Wl,-z,defs"},
      {"flush", f.cuda ? "a cudaMemsetAsync of max(256 MiB, 2 x L2) on the timing stream"
                       : "a memset of max(64 MiB, 2 x LLC)"},
      {"clock", f.cuda ? "CUDA events on the call's stream" : "a steady clock around the call"},
      // An ATen op by its qualified name; a chain's op (forge_chain::c_...) is qualified already.
      {"op", f.op.find("::") == std::string::npos ? "aten::" + f.op : f.op},
      {"signature", f.signature},
      {"args", f.args},
      {"outputs", f.outputs},
      {"family", f.family},
      {"family_yaml", with_newline(trim_family_yaml(f.family_yaml, f.dtypes))},
      {"device", device_text(f)},
      {"parent", parent_text(f)},
      {"history", f.history.empty() ? "Nothing yet.\n" : f.history},
      {"elsewhere", elsewhere_text(f)},
      {"variant", std::to_string(f.variant + 1) + " of " + std::to_string(f.variants)},
      {"goal", f.variant == 0 ? "improve on the parent with the most promising idea."
                              : "take a different approach from the earlier variants and the "
                                "failures listed above."},
  };
  Request r;
  r.system = render(t.system, v);
  r.messages.push_back({"user", render(t.variant, v)});
  r.variant = f.variant;
  return r;
}

Request repair_request(const PromptTemplates& t, Request request, const std::string& reply,
                       const std::string& problem, const std::string& detail, size_t max_chars) {
  request.messages.push_back({"assistant", reply});
  request.messages.push_back(
      {"user", render(t.repair, {{"problem", problem}, {"detail", bounded(detail, max_chars)}})});
  return request;
}

}  // namespace forge::llm
