// Language-model clients: one request (a system text and the conversation so
// far) in, one reply (text and token usage) out. Providers are named in
// forge.yaml, never guessed from a model name:
//   openai     POST {base}/chat/completions          Authorization: Bearer KEY
//              (any OpenAI-compatible server; base default https://api.openai.com/v1)
//   anthropic  POST {base}/v1/messages               x-api-key, anthropic-version: 2023-06-01
//   gemini     POST {base}/v1beta/models/M:generateContent   x-goog-api-key (not ?key=)
//   command    a program reads the prompt on stdin and prints the reply
//
// Robustness (HttpClient): connect and total timeouts; retries with exponential
// backoff on 429, 5xx, timeouts and unreachable servers, honouring Retry-After
// (capped); at most `concurrency` requests in flight (a counting semaphore).
// Failures that are not worth a retry (401/403 bad key, 404 unknown model, 400)
// end at once. Every failure is one line naming the provider and the cause.
//
// The API key is read from the environment variable forge.yaml names, sent in
// a header only, and removed ("***") from every error text forge keeps or shows.
//
// The transport sits behind HttpTransport, so tests run real loopback servers
// or fakes; the clock behind `sleep`, so backoff is tested without waiting.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/manifest.h"
#include "util/process.h"

namespace forge::llm {

struct Message {
  std::string role;  // "user" | "assistant"
  std::string text;
};

struct Request {
  std::string system;
  std::vector<Message> messages;
  // Everything that shapes the reply besides the text (max_tokens, temperature,
  // variant); enters the cache key. `variant` tells siblings apart.
  int max_tokens = 8192;
  std::optional<double> temperature;
  int variant = 0;
  nlohmann::json to_json() const;
};

struct Usage {
  long input_tokens = 0;
  long output_tokens = 0;
};

struct Reply {
  std::string text;
  Usage usage;
  bool cached = false;  // served from the store, nothing was sent
};

// A request that could not be answered: one line, key removed. `transient`:
// this request failed (no reply in time, the server busy or failing after the
// retries, a malformed reply, the command's failure) and another may succeed;
// otherwise the configuration is wrong (a refused or missing key, an unknown
// model, a request the server calls bad) and every request would fail alike.
struct LlmError : std::runtime_error {
  explicit LlmError(const std::string& what, bool transient = false)
      : std::runtime_error(what), transient(transient) {}
  bool transient = false;
};

class Client {
 public:
  virtual ~Client() = default;
  // Throws LlmError. Thread-safe.
  virtual Reply complete(const Request& request) = 0;
  // What identifies the answers (provider, model, base_url or command); never the key.
  virtual nlohmann::json identity() const = 0;
};

// ---- HTTP ---------------------------------------------------------------------

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
};

struct HttpResponse {
  long status = 0;          // 0 when no response arrived
  std::string body;
  std::optional<double> retry_after;  // seconds, from a Retry-After header
  std::string error;        // transport failure ("" when a response arrived)
  bool timed_out = false;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual HttpResponse post(const HttpRequest& request, double connect_timeout,
                            double total_timeout) = 0;
};

std::unique_ptr<HttpTransport> make_curl_transport();

struct ClientSettings {
  double connect_timeout = 10;
  double total_timeout = 300;
  int retries = 4;               // after the first attempt
  double backoff = 2;            // seconds before the first retry; doubles each time
  double backoff_cap = 60;       // no wait is longer (Retry-After included)
  int concurrency = 4;           // requests in flight
  std::filesystem::path cwd;     // where provider: command runs (forge.yaml's folder)
  std::function<void(double)> sleep;  // default: std::this_thread::sleep_for
  std::function<std::optional<std::string>(const std::string&)> getenv;  // default: ::getenv
};

// A provider's wire format (rules/llm/providers.cpp).
class Wire {
 public:
  virtual ~Wire() = default;
  virtual HttpRequest build(const Request& request, const std::string& key) const = 0;
  // The reply, or nullopt and *why for a 2xx body that does not say what it should.
  virtual std::optional<Reply> parse(const std::string& body, std::string* why) const = 0;
};
std::unique_ptr<Wire> make_wire(const LlmSpec& spec);  // openai | anthropic | gemini

// The provider's message from an error body ({"error": {"message": ...}}), or "".
std::string provider_error_message(const std::string& body);

// spec.provider openai/anthropic/gemini over `transport`; command over `runner`.
std::unique_ptr<Client> make_client(const LlmSpec& spec, ClientSettings settings,
                                    std::shared_ptr<HttpTransport> transport,
                                    CommandRunner& runner);

// The base URL a provider uses when forge.yaml gives none.
std::string default_base_url(const std::string& provider);

// `text` with every occurrence of `secret` replaced by "***" (nothing when empty).
std::string redact(std::string text, const std::string& secret);

}  // namespace forge::llm
