// Minimal JSON text building for the capture library (no dependencies: the
// library is built on the user's machine against their torch, nothing else).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace forge::capture::json {

// Appends s as a JSON string literal (with quotes).
inline void str(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

inline void num(std::string& out, int64_t v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void num(std::string& out, uint64_t v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Shortest round-trip text of a double. JSON has no NaN/Infinity: they are
// written as the strings "nan", "inf", "-inf".
inline void num(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "\"nan\"";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "\"inf\"" : "\"-inf\"";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string_view t(buf, r.ptr - buf);
  out += t;
  // Keep floats recognisable as floats ("2.0", not "2").
  if (t.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

// Rounds to 3 decimals (nanosecond resolution for microsecond values).
inline void micros(std::string& out, int64_t ns) {
  num(out, static_cast<double>(ns) / 1000.0);
}

inline void boolean(std::string& out, bool b) { out += b ? "true" : "false"; }

}  // namespace forge::capture::json
