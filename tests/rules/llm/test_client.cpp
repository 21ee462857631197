// The HTTP providers against a real loopback server speaking each wire format:
// request shape (path, headers, body), reply parsing and token usage, retries
// on 429 (Retry-After honoured and capped) and 5xx, timeouts, bad keys, unknown
// models, malformed replies, unreachable servers -- and the key never in a
// message.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "rules/llm/client.h"
#include "tests/rules/llm/fake_server.h"
#include "util/process.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::llm::Client");

namespace {

const std::string kKey = "sk-PLANTED-test-key-0123456789";

struct Harness {
  test::FakeLlmServer server;
  std::vector<double> sleeps;
  std::unique_ptr<CommandRunner> runner = make_process_runner();

  std::unique_ptr<llm::Client> client(const std::string& provider, double timeout = 5,
                                      int retries = 2) {
    LlmSpec spec;
    spec.provider = provider;
    spec.model = "m-1";
    spec.base_url = server.url() + (provider == "openai" ? "/v1" : "");
    spec.api_key_env = "FORGE_TEST_KEY";
    llm::ClientSettings s;
    s.total_timeout = timeout;
    s.connect_timeout = 2;
    s.retries = retries;
    s.backoff = 0.5;
    s.backoff_cap = 7;
    s.sleep = [this](double sec) { sleeps.push_back(sec); };
    s.getenv = [](const std::string& name) -> std::optional<std::string> {
      if (name == "FORGE_TEST_KEY") return kKey;
      return std::nullopt;
    };
    return llm::make_client(spec, s, nullptr, *runner);
  }
};

llm::Request request() {
  llm::Request r;
  r.system = "you write kernels";
  r.messages.push_back({"user", "write one"});
  r.max_tokens = 100;
  return r;
}

std::string openai_ok(const std::string& text) {
  return json{{"choices", {{{"message", {{"role", "assistant"}, {"content", text}}}}}},
              {"usage", {{"prompt_tokens", 11}, {"completion_tokens", 7}}}}
      .dump();
}

// The error's text; *transient says whether another request may succeed.
std::string error_text(llm::Client& c, bool* transient = nullptr) {
  try {
    c.complete(request());
  } catch (const llm::LlmError& e) {
    if (transient) *transient = e.transient;
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("openai: chat completions request and reply") {
  Harness h;
  h.server.push({200, openai_ok("```cpp\nint x;\n```")});
  auto c = h.client("openai");
  llm::Reply r = c->complete(request());
  CHECK(r.text == "```cpp\nint x;\n```");
  CHECK(r.usage.input_tokens == 11);
  CHECK(r.usage.output_tokens == 7);
  auto seen = h.server.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].path == "/v1/chat/completions");
  CHECK(seen[0].header("Authorization") == "Bearer " + kKey);
  json body = json::parse(seen[0].body);
  CHECK(body["model"] == "m-1");
  CHECK(body["max_tokens"] == 100);
  CHECK_FALSE(body.contains("temperature"));
  CHECK(body["messages"][0] == json{{"role", "system"}, {"content", "you write kernels"}});
  CHECK(body["messages"][1] == json{{"role", "user"}, {"content", "write one"}});
}

TEST_CASE("anthropic: messages API request and reply") {
  Harness h;
  h.server.push({200, R"({"content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}],
                        "usage": {"input_tokens": 20, "output_tokens": 3}})"});
  auto c = h.client("anthropic");
  llm::Reply r = c->complete(request());
  CHECK(r.text == "hello there");
  CHECK(r.usage.input_tokens == 20);
  CHECK(r.usage.output_tokens == 3);
  auto seen = h.server.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].path == "/v1/messages");
  CHECK(seen[0].header("x-api-key") == kKey);
  CHECK(seen[0].header("anthropic-version") == "2023-06-01");
  json body = json::parse(seen[0].body);
  CHECK(body["system"] == "you write kernels");
  CHECK(body["max_tokens"] == 100);
  CHECK(body["messages"] == json::array({{{"role", "user"}, {"content", "write one"}}}));
}

TEST_CASE("gemini: generateContent with the key in a header, not the URL") {
  Harness h;
  h.server.push({200, R"({"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}}],
                        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}})"});
  auto c = h.client("gemini");
  llm::Reply r = c->complete(request());
  CHECK(r.text == "ok");
  CHECK(r.usage.input_tokens == 5);
  CHECK(r.usage.output_tokens == 2);
  auto seen = h.server.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].path == "/v1beta/models/m-1:generateContent");
  CHECK(seen[0].path.find(kKey) == std::string::npos);
  CHECK(seen[0].header("x-goog-api-key") == kKey);
  json body = json::parse(seen[0].body);
  CHECK(body["systemInstruction"]["parts"][0]["text"] == "you write kernels");
  CHECK(body["contents"][0]["role"] == "user");
  CHECK(body["generationConfig"]["maxOutputTokens"] == 100);
}

TEST_CASE("429 with Retry-After, then 500, then success: retried, Retry-After honoured and capped") {
  Harness h;
  h.server.push({429, R"({"error": {"message": "slow down"}})", "3"});
  h.server.push({429, R"({"error": {"message": "slow down"}})", "100"});
  h.server.push({503, "upstream down"});
  h.server.push({200, openai_ok("fine")});
  auto c = h.client("openai", 5, 3);
  CHECK(c->complete(request()).text == "fine");
  CHECK(h.server.seen().size() == 4);
  // Retry-After 3, Retry-After 100 capped at 7, then backoff 0.5 * 2^2.
  CHECK(h.sleeps == std::vector<double>{3, 7, 2});
}

TEST_CASE("retries run out: one line with the last cause") {
  Harness h;
  for (int i = 0; i < 3; ++i) h.server.push({500, R"({"error": {"message": "boom"}})"});
  auto c = h.client("openai", 5, 2);
  bool transient = false;
  CHECK(error_text(*c, &transient) == "openai (m-1): HTTP 500: boom (after 3 attempts)");
  CHECK(transient);  // this request failed; the search goes on without it
  CHECK(h.sleeps == std::vector<double>{0.5, 1});
}

TEST_CASE("a bad key is refused at once, and the key is not in the message") {
  Harness h;
  h.server.push({401, json{{"error", {{"message", "Incorrect API key provided: " + kKey}}}}.dump()});
  auto c = h.client("openai");
  bool transient = true;
  const std::string e = error_text(*c, &transient);
  CHECK_FALSE(transient);  // every request would fail alike: the search stops
  CHECK(e == "openai (m-1): the API key in FORGE_TEST_KEY was refused (HTTP 401): "
             "Incorrect API key provided: ***");
  CHECK(h.server.seen().size() == 1);
  CHECK(h.sleeps.empty());
}

TEST_CASE("an unknown model: 404 with the provider's message") {
  Harness h;
  h.server.push({404, R"({"type": "error", "error": {"type": "not_found_error", "message": "model: m-1"}})"});
  auto c = h.client("anthropic");
  bool transient = true;
  CHECK(error_text(*c, &transient) == "anthropic (m-1): model 'm-1' or endpoint not found at " + h.server.url() +
                              " (HTTP 404): model: m-1");
  CHECK_FALSE(transient);
}

TEST_CASE("a slow server: the total timeout ends the request, then the retries") {
  Harness h;
  h.server.push({200, openai_ok("late"), "", 3});
  h.server.push({200, openai_ok("late"), "", 3});
  auto c = h.client("openai", 0.5, 1);
  bool transient = false;
  const std::string e = error_text(*c, &transient);
  CHECK(transient);
  CHECK(e == "openai (m-1): no reply from " + h.server.url() + "/v1 within 0.5 s (after 2 attempts)");
}

TEST_CASE("malformed replies are errors, not empty kernels") {
  Harness h;
  h.server.push({200, "<html>gateway</html>"});
  h.server.push({200, R"({"choices": []})"});
  auto c = h.client("openai");
  bool transient = false;
  CHECK(error_text(*c, &transient) == "openai (m-1): malformed reply from " + h.server.url() +
                                          "/v1: not a JSON object: <html>gateway</html>");
  CHECK(transient);
  CHECK(error_text(*c) == "openai (m-1): malformed reply from " + h.server.url() +
                              "/v1: no choices[0].message.content");
}

TEST_CASE("an unreachable server and a missing key") {
  std::unique_ptr<CommandRunner> runner = make_process_runner();
  LlmSpec spec;
  spec.provider = "openai";
  spec.model = "m";
  spec.base_url = "http://127.0.0.1:9";  // discard port: nothing listens
  spec.api_key_env = "FORGE_TEST_KEY";
  llm::ClientSettings s;
  s.retries = 1;
  s.sleep = [](double) {};
  s.getenv = [](const std::string&) -> std::optional<std::string> { return kKey; };
  auto c = llm::make_client(spec, s, nullptr, *runner);
  const std::string e = error_text(*c);
  CHECK(e.rfind("openai (m): cannot reach http://127.0.0.1:9: ", 0) == 0);
  CHECK(e.find("(after 2 attempts)") != std::string::npos);

  s.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto nokey = llm::make_client(spec, s, nullptr, *runner);
  bool transient = true;
  CHECK(error_text(*nokey, &transient) ==
        "openai (m): environment variable FORGE_TEST_KEY is not set (proposer.llm.api_key_env names it)");
  CHECK_FALSE(transient);
}

TEST_CASE("the concurrency limit holds requests back") {
  Harness h;
  for (int i = 0; i < 4; ++i) h.server.push({200, openai_ok("x"), "", 0.3});
  LlmSpec spec;
  spec.provider = "openai";
  spec.model = "m";
  spec.base_url = h.server.url();
  spec.api_key_env = "";
  llm::ClientSettings s;
  s.concurrency = 1;
  auto c = llm::make_client(spec, s, nullptr, *h.runner);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { c->complete(request()); });
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs >= 0.85);  // three 0.3 s replies one after another
}

TEST_SUITE_END();
}  // namespace forge
