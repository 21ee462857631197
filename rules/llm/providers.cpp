// The wire formats of the HTTP providers: how a Request becomes a POST and a
// 2xx body becomes a Reply (text and token usage).
#include <stdexcept>

#include "rules/llm/client.h"

namespace forge::llm {
using nlohmann::json;

namespace {

std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

long count(const json& j, const char* field) {
  return j.is_object() && j.contains(field) && j[field].is_number_integer() ? j[field].get<long>()
                                                                             : 0;
}

std::optional<json> parse_json(const std::string& body, std::string* why) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not a JSON object: " + body.substr(0, 120);
    return std::nullopt;
  }
  return j;
}

// OpenAI chat completions (and every server that speaks it: vLLM, llama.cpp,
// Ollama, OpenRouter...). The system text is the first message.
class OpenAiWire : public Wire {
 public:
  explicit OpenAiWire(LlmSpec s) : m_spec(std::move(s)) {}
  HttpRequest build(const Request& r, const std::string& key) const override {
    json msgs = json::array({{{"role", "system"}, {"content", r.system}}});
    for (const auto& m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.text}});
    json body = {{"model", m_spec.model}, {"messages", msgs}, {"max_tokens", r.max_tokens}};
    if (r.temperature) body["temperature"] = *r.temperature;
    HttpRequest h{trim_slash(m_spec.base_url) + "/chat/completions", {"Content-Type: application/json"},
                  body.dump()};
    if (!key.empty()) h.headers.push_back("Authorization: Bearer " + key);
    return h;
  }
  std::optional<Reply> parse(const std::string& body, std::string* why) const override {
    auto j = parse_json(body, why);
    if (!j) return std::nullopt;
    const json& choices = j->value("choices", json());
    if (!choices.is_array() || choices.empty() || !choices[0].is_object() ||
        !choices[0].value("message", json()).is_object() ||
        !choices[0]["message"].value("content", json()).is_string()) {
      *why = "no choices[0].message.content";
      return std::nullopt;
    }
    Reply r;
    r.text = choices[0]["message"]["content"].get<std::string>();
    const json& u = j->value("usage", json());
    r.usage = {count(u, "prompt_tokens"), count(u, "completion_tokens")};
    return r;
  }

 private:
  LlmSpec m_spec;
};

// Anthropic Messages API.
class AnthropicWire : public Wire {
 public:
  explicit AnthropicWire(LlmSpec s) : m_spec(std::move(s)) {}
  HttpRequest build(const Request& r, const std::string& key) const override {
    json msgs = json::array();
    for (const auto& m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.text}});
    json body = {{"model", m_spec.model},
                 {"system", r.system},
                 {"messages", msgs},
                 {"max_tokens", r.max_tokens}};
    if (r.temperature) body["temperature"] = *r.temperature;
    HttpRequest h{trim_slash(m_spec.base_url) + "/v1/messages",
                  {"Content-Type: application/json", "anthropic-version: 2023-06-01"},
                  body.dump()};
    if (!key.empty()) h.headers.push_back("x-api-key: " + key);
    return h;
  }
  std::optional<Reply> parse(const std::string& body, std::string* why) const override {
    auto j = parse_json(body, why);
    if (!j) return std::nullopt;
    const json& content = j->value("content", json());
    if (!content.is_array()) {
      *why = "no content list";
      return std::nullopt;
    }
    Reply r;
    bool any = false;
    for (const auto& block : content)
      if (block.is_object() && block.value("type", "") == "text" &&
          block.value("text", json()).is_string()) {
        r.text += block["text"].get<std::string>();
        any = true;
      }
    if (!any) {
      *why = "no text block in content";
      return std::nullopt;
    }
    const json& u = j->value("usage", json());
    r.usage = {count(u, "input_tokens"), count(u, "output_tokens")};
    return r;
  }

 private:
  LlmSpec m_spec;
};

// Gemini generateContent. The key goes in x-goog-api-key, never in the URL.
class GeminiWire : public Wire {
 public:
  explicit GeminiWire(LlmSpec s) : m_spec(std::move(s)) {}
  HttpRequest build(const Request& r, const std::string& key) const override {
    json contents = json::array();
    for (const auto& m : r.messages)
      contents.push_back({{"role", m.role == "assistant" ? "model" : "user"},
                          {"parts", json::array({{{"text", m.text}}})}});
    json config = {{"maxOutputTokens", r.max_tokens}};
    if (r.temperature) config["temperature"] = *r.temperature;
    json body = {{"systemInstruction", {{"parts", json::array({{{"text", r.system}}})}}},
                 {"contents", contents},
                 {"generationConfig", config}};
    HttpRequest h{trim_slash(m_spec.base_url) + "/v1beta/models/" + m_spec.model +
                      ":generateContent",
                  {"Content-Type: application/json"}, body.dump()};
    if (!key.empty()) h.headers.push_back("x-goog-api-key: " + key);
    return h;
  }
  std::optional<Reply> parse(const std::string& body, std::string* why) const override {
    auto j = parse_json(body, why);
    if (!j) return std::nullopt;
    const json& cands = j->value("candidates", json());
    if (!cands.is_array() || cands.empty() || !cands[0].is_object()) {
      *why = "no candidates";
      return std::nullopt;
    }
    const json& parts = cands[0].value("content", json::object()).value("parts", json());
    Reply r;
    bool any = false;
    if (parts.is_array())
      for (const auto& p : parts)
        if (p.is_object() && p.value("text", json()).is_string()) {
          r.text += p["text"].get<std::string>();
          any = true;
        }
    if (!any) {
      *why = "no text in candidates[0].content.parts (finishReason " +
             cands[0].value("finishReason", json("?")).dump() + ")";
      return std::nullopt;
    }
    const json& u = j->value("usageMetadata", json());
    r.usage = {count(u, "promptTokenCount"), count(u, "candidatesTokenCount")};
    return r;
  }

 private:
  LlmSpec m_spec;
};

}  // namespace

std::unique_ptr<Wire> make_wire(const LlmSpec& spec) {
  LlmSpec s = spec;
  if (s.base_url.empty()) s.base_url = default_base_url(s.provider);
  if (s.provider == "openai") return std::make_unique<OpenAiWire>(s);
  if (s.provider == "anthropic") return std::make_unique<AnthropicWire>(s);
  if (s.provider == "gemini") return std::make_unique<GeminiWire>(s);
  throw std::invalid_argument("no HTTP wire format for provider '" + spec.provider + "'");
}

std::string provider_error_message(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return "";
  const json& e = j.value("error", json());
  if (e.is_object() && e.value("message", json()).is_string()) return e["message"];
  if (e.is_string()) return e.get<std::string>();
  if (j.value("message", json()).is_string()) return j["message"];
  return "";
}

}  // namespace forge::llm
