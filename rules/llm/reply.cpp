#include "rules/llm/reply.h"

#include <cctype>
#include <regex>

namespace forge::llm {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::vector<CodeBlock> code_blocks(const std::string& reply) {
  std::vector<CodeBlock> out;
  bool inside = false;
  CodeBlock cur;
  size_t pos = 0;
  while (pos <= reply.size()) {
    size_t nl = reply.find('\n', pos);
    const std::string line = reply.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    const std::string t = trim(line);
    if (t.rfind("```", 0) == 0) {
      if (!inside) {
        inside = true;
        cur = {};
        for (char c : t.substr(3)) cur.info += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        cur.info = trim(cur.info);
      } else {
        inside = false;
        out.push_back(cur);
      }
    } else if (inside) {
      cur.text += line + "\n";
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  if (inside && !cur.text.empty()) out.push_back(cur);
  return out;
}

std::string idea_of(const std::string& reply, size_t max_chars) {
  size_t fence = reply.find("```");
  std::string prose = reply.substr(0, fence);
  // Plain words: headings, emphasis and list marks dropped, whitespace folded.
  std::string words;
  bool space = false;
  for (char c : prose) {
    if (c == '*' || c == '#' || c == '`') continue;
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !words.empty();
      continue;
    }
    if (space) words += ' ';
    space = false;
    words += c;
  }
  // The first sentence: up to a period, ! or ? followed by a space (or the
  // end), past the first 24 characters and not an abbreviation's ("e.g.").
  for (size_t i = 24; i < words.size(); ++i)
    if ((words[i] == '.' || words[i] == '!' || words[i] == '?') &&
        (i + 1 == words.size() || words[i + 1] == ' ') && !(words[i] == '.' && words[i - 2] == '.')) {
      words.resize(i + 1);
      break;
    }
  if (words.size() <= max_chars) return words;
  size_t cut = words.rfind(' ', max_chars - 3);
  if (cut == std::string::npos || cut < max_chars / 2) cut = max_chars - 3;
  return words.substr(0, cut) + "...";
}

bool defines_entry(const std::string& source) {
  static const std::regex def(R"(\bint\s+forge_kernel\s*\([^)]*\)\s*\{)");
  return std::regex_search(source, def);
}

Extracted extract_kernel(const std::string& reply) {
  Extracted x;
  auto blocks = code_blocks(reply);
  for (const auto& b : blocks)
    if (defines_entry(b.text)) {
      x.status = Extracted::Status::Found;
      x.source = b.text;
    }
  if (x.status == Extracted::Status::Found) return x;
  if (blocks.empty()) {
    if (defines_entry(reply)) return {Extracted::Status::Found, reply};
    if (reply.find("#include") != std::string::npos) return {Extracted::Status::NoEntry, reply};
    return x;
  }
  x.status = Extracted::Status::NoEntry;
  for (const auto& b : blocks)
    if (b.text.size() > x.source.size()) x.source = b.text;
  return x;
}

}  // namespace forge::llm
