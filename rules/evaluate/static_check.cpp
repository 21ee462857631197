#include "rules/evaluate/static_check.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace forge {

namespace {

// Rule ids, in check order. Keep in sync with static_rules().
const StaticRule kRules[] = {
    {"torch_header",
     "includes a torch, ATen, c10 or Python header: candidates are torch-free (such a file takes "
     "~40 s to compile) and must not call the op they replace"},
    {"library",
     "uses a vendor library (cuBLAS, cuDNN, BLAS, ...): the kernel must be the candidate's own "
     "code, launching only its own kernels"},
    {"thread",
     "starts a thread or a process: all work must finish inside the call, or the timer misses "
     "it"},
    {"stream",
     "creates or picks its own stream, event or callback: work must run on call->stream, or the "
     "timer and CUDA graphs miss it",
     false, true},
    {"default_stream",
     "launches a kernel without call->stream as the launch's stream (the default stream is not "
     "the caller's stream)",
     false, true},
    {"environment", "reads or changes the environment: a kernel may depend only on its inputs"},
    {"io",
     "does file, console, network or process I/O: a kernel computes, it does not talk to the "
     "outside"},
    {"dynamic_loading",
     "loads or binds code at run time (dlopen, dlsym, weak symbols, module loading): that hides "
     "library calls from every other check"},
    {"allocation",
     "allocates or frees device or mapped memory: the caller allocates outputs and the workspace "
     "(forge_workspace_bytes)"},
    {"inline_asm",
     "uses inline assembly on the CPU: it can make system calls no other check sees (use "
     "intrinsics)",
     true, false},
    {"no_entry", "defines no `int forge_kernel(const forge_call*)`: the ABI entry point"},
};

const StaticRule& rule(const std::string& id) {
  for (const auto& r : kRules)
    if (id == r.id) return r;
  return kRules[0];
}

struct TokenRule {
  const char* id;
  std::regex pattern;
  bool cpp = true, cuda = true;  // which languages it applies to
};

std::regex re(const char* text) {
  return std::regex(text, std::regex::ECMAScript);
}

const std::vector<TokenRule>& token_rules() {
  static const std::vector<TokenRule> rules = [] {
    std::vector<TokenRule> r;
    r.push_back(
        {"library",
         re(R"(\b(cublas|cublasLt|cudnn|cufft|cusparse|cusolver|cutensor|nccl)[A-Z_]\w*|\bcurand(Create|Generate|Destroy|Set)\w*)")});
    r.push_back({"library", re(R"(\b(cblas|LAPACKE|mkl|dnnl)_\w+)")});
    r.push_back({"thread", re(R"(\bstd\s*::\s*(thread|jthread|async)\b)")});
    r.push_back({"thread", re(R"(\b(thread|jthread)\s+\w+\s*[({])")});
    r.push_back({"thread", re(R"(\b(pthread_create|thrd_create)\b)")});
    r.push_back({"thread", re(R"(\b(fork|vfork|clone|clone3|posix_spawnp?|daemon)\s*\()")});
    r.push_back({"stream", re(R"(\bcu(da)?StreamCreate\w*)")});
    r.push_back({"stream", re(R"(\bcu(da)?StreamBeginCapture\w*)")});
    r.push_back(
        {"stream",
         re(R"(\b(cudaStreamPerThread|cudaStreamLegacy|CU_STREAM_LEGACY|CU_STREAM_PER_THREAD)\b)")});
    r.push_back({"stream", re(R"(\bcu(da)?EventCreate\w*)")});
    r.push_back(
        {"stream",
         re(R"(\b(cudaLaunchHostFunc|cuLaunchHostFunc|cudaStreamAddCallback|cuStreamAddCallback)\b)")});
    r.push_back({"stream", re(R"(\bcu(da)?GraphLaunch\b)")});
    r.push_back(
        {"environment", re(R"(\b(getenv|secure_getenv|setenv|unsetenv|putenv|clearenv)\s*\()")});
    r.push_back({"environment", re(R"(\b_{0,2}environ\b)")});
    r.push_back(
        {"io",
         re(R"(\b(fopen|fopen64|freopen|fdopen|open|open64|openat|creat|socket|socketpair|connect|accept|accept4|sendto|recvfrom|sendmsg|recvmsg|system|popen|execl|execlp|execle|execv|execvp|execvpe|fexecve|syscall|mkfifo|opendir|ioctl|unlink|printf|puts|putchar|fprintf|fputs|fwrite|perror|dprintf|vprintf|vfprintf)\s*\()")});
    r.push_back({"io", re(R"(\b(read|write|pread|pwrite)\s*\(\s*(\d|STD\w*_FILENO))")});
    r.push_back({"io", re(R"(\b(basic_)?[io]?fstream\b|\bfilebuf\b)")});
    r.push_back({"io", re(R"(\bstd\s*::\s*(filesystem|cout|cerr|clog|wcout|wcerr)\b)")});
    r.push_back({"io", re(R"(\bcurl_\w+)")});
    r.push_back({"dynamic_loading",
                 re(R"(\b(dlopen|dlmopen|dlsym|dlvsym|dladdr|dlinfo|__libc_dlopen_mode)\b)")});
    r.push_back({"dynamic_loading",
                 re(R"(\b(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*|nvrtc[A-Z]\w*)\b)")});
    // A weak reference links without its definition and binds at load time to
    // whatever the process has (torch): a library call without dlsym.
    r.push_back({"dynamic_loading",
                 re(R"(\b__attribute__\s*\(\s*\(\s*(__)?weak(__)?\b|#\s*pragma\s+weak\b)")});
    r.push_back(
        {"allocation", re(R"(\bcu(da)?Malloc\w*|\bcuMemAlloc\w*|\bcuMemCreate\b|\bcuMemMap\b)")});
    r.push_back({"allocation",
                 re(R"(\b(cudaHostAlloc|cudaMallocHost|cudaHostRegister|cuMemHostAlloc)\b)")});
    r.push_back({"allocation", re(R"(\bcu(da)?Free\w*|\bcuMemFree\w*)")});
    r.push_back({"allocation", re(R"(\b(mmap|mmap64|shm_open|memfd_create|brk|sbrk)\s*\()")});
    TokenRule asm_rule{"inline_asm", re(R"(\b(asm|__asm__|__asm)\b)")};
    asm_rule.cuda = false;  // inline PTX is ordinary CUDA and runs on the device
    r.push_back(std::move(asm_rule));
    return r;
  }();
  return rules;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The include target of a preprocessor line, or "" when it is not an #include.
std::string include_target(const std::string& line) {
  static const std::regex inc(R"(^\s*#\s*include\s*[<"]([^>"]*)[>"])");
  std::smatch m;
  return std::regex_search(line, m, inc) ? m[1].str() : "";
}

const char* include_rule(const std::string& header) {
  static const std::regex torch(R"(^(torch|ATen|c10|caffe2|pybind11)/|^(Python\.h|torch\.h)$)");
  static const std::regex library(
      R"(^(cublas|cublasLt|cublas_v2|cudnn|cufft|cusparse|cusolver|cutensor|nccl|mkl|cblas|lapacke|dnnl|oneapi/)|^curand\.h$)");
  if (std::regex_search(header, torch)) return "torch_header";
  if (std::regex_search(header, library)) return "library";
  return nullptr;
}

// Line (1-based) of byte offset `pos`.
int line_of(const std::string& text, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

// CUDA launches `k<<<grid, block[, smem[, stream]]>>>` whose stream is absent
// or the default stream. Offsets of the offending "<<<".
std::vector<size_t> default_stream_launches(const std::string& code) {
  static const std::regex default_stream(
      R"(^\s*(0|0L|nullptr|NULL|\(\s*cudaStream_t\s*\)\s*0)\s*$)");
  std::vector<size_t> out;
  size_t pos = 0;
  while ((pos = code.find("<<<", pos)) != std::string::npos) {
    size_t end = code.find(">>>", pos + 3);
    if (end == std::string::npos) break;
    std::vector<std::string> args(1);
    int depth = 0;
    for (size_t i = pos + 3; i < end; ++i) {
      char c = code[i];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (c == ',' && depth == 0)
        args.emplace_back();
      else
        args.back().push_back(c);
    }
    if (args.size() < 4 || std::regex_search(args[3], default_stream)) out.push_back(pos);
    pos = end + 3;
  }
  return out;
}

bool defines_entry(const std::string& code) {
  static const std::regex entry(R"(\bforge_kernel\s*\([^;{}()]*\)\s*(noexcept\s*)?\{)");
  return std::regex_search(code, entry);
}

}  // namespace

const std::vector<StaticRule>& static_rules() {
  static const std::vector<StaticRule> rules(std::begin(kRules), std::end(kRules));
  return rules;
}

std::vector<StaticRule> static_rules(CandidateLang lang) {
  std::vector<StaticRule> out;
  for (const auto& r : kRules)
    if (lang == CandidateLang::Cuda ? r.cuda : r.cpp) out.push_back(r);
  return out;
}

std::string StaticViolation::describe() const {
  std::string s = rule;
  if (line > 0) s += " (line " + std::to_string(line) + ")";
  s += ": " + rationale;
  if (!text.empty()) s += ": `" + text + "`";
  return s;
}

std::string blank_comments(const std::string& src, bool keep_strings) {
  std::string out = src;
  enum class State { Code, LineComment, BlockComment, String, Char, RawString };
  State st = State::Code;
  std::string raw_end;  // ")delim\"" closing the current raw string
  auto blank = [&](size_t i) {
    if (out[i] != '\n') out[i] = ' ';
  };
  for (size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    const char next = i + 1 < src.size() ? src[i + 1] : '\0';
    switch (st) {
      case State::Code:
        if (c == '/' && next == '/') {
          st = State::LineComment;
          blank(i);
        } else if (c == '/' && next == '*') {
          st = State::BlockComment;
          blank(i);
          blank(++i);
        } else if (c == 'R' && next == '"' &&
                   (i == 0 || !ident_char(src[i - 1]) || src[i - 1] == 'u' || src[i - 1] == 'U' ||
                    src[i - 1] == 'L' || src[i - 1] == '8')) {
          size_t open = src.find('(', i + 2);
          if (open == std::string::npos) break;
          raw_end = ")" + src.substr(i + 2, open - i - 2) + "\"";
          st = State::RawString;
          i = open;
        } else if (c == '"') {
          st = State::String;
        } else if (c == '\'' && (i == 0 || !ident_char(src[i - 1]))) {
          // Not a digit separator (1'000'000): those follow a digit.
          st = State::Char;
        }
        break;
      case State::LineComment:
        if (c == '\n') {
          st = State::Code;
        } else if (c == '\\' && next == '\n') {
          blank(i);
          ++i;  // a continued line comment goes on
        } else {
          blank(i);
        }
        break;
      case State::BlockComment:
        if (c == '*' && next == '/') {
          blank(i);
          blank(++i);
          st = State::Code;
        } else {
          blank(i);
        }
        break;
      case State::String:
      case State::Char: {
        const char close = st == State::String ? '"' : '\'';
        if (c == '\\') {
          if (!keep_strings) blank(i);
          if (i + 1 < src.size()) {
            ++i;
            if (!keep_strings) blank(i);
          }
        } else if (c == close || c == '\n') {
          st = State::Code;  // an unterminated literal ends at the line
        } else if (!keep_strings) {
          blank(i);
        }
        break;
      }
      case State::RawString:
        if (src.compare(i, raw_end.size(), raw_end) == 0) {
          i += raw_end.size() - 1;
          st = State::Code;
        } else if (!keep_strings) {
          blank(i);
        }
        break;
    }
  }
  return out;
}

std::vector<StaticViolation> static_check(const std::string& source, CandidateLang lang) {
  const std::vector<std::string> original = split_lines(source);
  const std::string no_comments = blank_comments(source, /*keep_strings=*/true);
  const std::string code = blank_comments(source, /*keep_strings=*/false);
  const std::vector<std::string> include_lines = split_lines(no_comments);
  const std::vector<std::string> code_lines = split_lines(code);

  std::vector<StaticViolation> found;
  auto add = [&](const std::string& id, int line) {
    const std::string text =
        line > 0 && line <= static_cast<int>(original.size()) ? trim(original[line - 1]) : "";
    found.push_back(
        {id, line, text.size() > 160 ? text.substr(0, 160) + "…" : text, rule(id).rationale});
  };

  for (size_t i = 0; i < include_lines.size(); ++i) {
    const std::string header = include_target(include_lines[i]);
    if (header.empty()) continue;
    if (const char* id = include_rule(header)) add(id, static_cast<int>(i) + 1);
  }
  for (const auto& tr : token_rules()) {
    if ((lang == CandidateLang::Cpp && !tr.cpp) || (lang == CandidateLang::Cuda && !tr.cuda))
      continue;
    for (size_t i = 0; i < code_lines.size(); ++i)
      if (std::regex_search(code_lines[i], tr.pattern)) add(tr.id, static_cast<int>(i) + 1);
  }
  if (lang == CandidateLang::Cuda)
    for (size_t pos : default_stream_launches(code)) add("default_stream", line_of(code, pos));
  if (!defines_entry(code)) add("no_entry", 0);

  // Rule order (kRules), then line; one entry per (rule, line).
  auto rank = [](const std::string& id) {
    for (size_t i = 0; i < std::size(kRules); ++i)
      if (id == kRules[i].id) return i;
    return std::size(kRules);
  };
  std::stable_sort(found.begin(), found.end(), [&](const auto& a, const auto& b) {
    return rank(a.rule) != rank(b.rule) ? rank(a.rule) < rank(b.rule) : a.line < b.line;
  });
  found.erase(std::unique(found.begin(), found.end(),
                          [](const auto& a, const auto& b) {
                            return a.rule == b.rule && a.line == b.line;
                          }),
              found.end());
  return found;
}

}  // namespace forge
