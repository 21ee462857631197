// The retrying HTTP client and the command client (rules/llm/client.h).
#include "rules/llm/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "util/atomic_file.h"

namespace forge::llm {
using nlohmann::json;

nlohmann::json Request::to_json() const {
  json msgs = json::array();
  for (const auto& m : messages) msgs.push_back({{"role", m.role}, {"text", m.text}});
  return {{"system", system},
          {"messages", msgs},
          {"max_tokens", max_tokens},
          {"temperature", temperature ? json(*temperature) : json(nullptr)},
          {"variant", variant}};
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at))
    text.replace(at, secret.size(), "***");
  return text;
}

std::string default_base_url(const std::string& provider) {
  if (provider == "openai") return "https://api.openai.com/v1";
  if (provider == "anthropic") return "https://api.anthropic.com";
  if (provider == "gemini") return "https://generativelanguage.googleapis.com";
  return "";
}

namespace {

// One line of at most `n` characters.
std::string one_line(std::string s, size_t n = 300) {
  for (auto& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

class Semaphore {
 public:
  explicit Semaphore(int n) : m_free(n < 1 ? 1 : n) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [&] { return m_free > 0; });
    --m_free;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      ++m_free;
    }
    m_cv.notify_one();
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  int m_free;
};

struct Slot {
  explicit Slot(Semaphore& s) : m_s(s) { m_s.acquire(); }
  ~Slot() { m_s.release(); }
  Semaphore& m_s;
};

void fill_defaults(ClientSettings& s) {
  if (!s.sleep)
    s.sleep = [](double sec) { std::this_thread::sleep_for(std::chrono::duration<double>(sec)); };
  if (!s.getenv)
    s.getenv = [](const std::string& name) -> std::optional<std::string> {
      const char* v = std::getenv(name.c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    };
}

class HttpClient : public Client {
 public:
  HttpClient(LlmSpec spec, ClientSettings settings, std::shared_ptr<HttpTransport> transport)
      : m_spec(std::move(spec)), m_settings(std::move(settings)),
        m_transport(std::move(transport)), m_wire(make_wire(m_spec)),
        m_slots(m_settings.concurrency) {
    if (m_spec.base_url.empty()) m_spec.base_url = default_base_url(m_spec.provider);
  }

  json identity() const override {
    return {{"provider", m_spec.provider}, {"model", m_spec.model}, {"base_url", m_spec.base_url}};
  }

  Reply complete(const Request& request) override {
    const std::string who = m_spec.provider + " (" + m_spec.model + ")";
    std::string key;
    if (!m_spec.api_key_env.empty()) {
      auto v = m_settings.getenv(m_spec.api_key_env);
      if (!v || v->empty())
        throw LlmError(who + ": environment variable " + m_spec.api_key_env +
                       " is not set (proposer.llm.api_key_env names it)");
      key = *v;
    }
    const HttpRequest http = m_wire->build(request, key);
    std::string last;
    for (int attempt = 0;; ++attempt) {
      HttpResponse r;
      {
        Slot slot(m_slots);
        r = m_transport->post(http, m_settings.connect_timeout, m_settings.total_timeout);
      }
      const std::string detail = redact(one_line(provider_error_message(r.body).empty()
                                                     ? r.body
                                                     : provider_error_message(r.body)),
                                        key);
      bool retry = false;
      if (r.status == 0) {
        last = r.timed_out ? "no reply from " + m_spec.base_url + " within " +
                                 seconds_text(m_settings.total_timeout)
                           : "cannot reach " + m_spec.base_url + ": " + redact(r.error, key);
        retry = true;
      } else if (r.status >= 200 && r.status < 300) {
        std::string why;
        auto reply = m_wire->parse(r.body, &why);
        if (reply) return *reply;
        throw LlmError(who + ": malformed reply from " + m_spec.base_url + ": " +
                           redact(one_line(why), key),
                       /*transient=*/true);
      } else if (r.status == 401 || r.status == 403) {
        throw LlmError(who + ": the API key in " + m_spec.api_key_env + " was refused (HTTP " +
                       std::to_string(r.status) + ")" + (detail.empty() ? "" : ": " + detail));
      } else if (r.status == 404) {
        throw LlmError(who + ": model '" + m_spec.model + "' or endpoint not found at " +
                       m_spec.base_url + " (HTTP 404)" + (detail.empty() ? "" : ": " + detail));
      } else if (r.status == 429 || r.status >= 500) {
        last = "HTTP " + std::to_string(r.status) + (detail.empty() ? "" : ": " + detail);
        retry = true;
      } else {
        throw LlmError(who + ": HTTP " + std::to_string(r.status) +
                       (detail.empty() ? "" : ": " + detail));
      }
      if (!retry || attempt >= m_settings.retries)
        throw LlmError(who + ": " + last + " (after " + std::to_string(attempt + 1) +
                           (attempt ? " attempts)" : " attempt)"),
                       /*transient=*/retry);
      double wait = m_settings.backoff * static_cast<double>(1L << std::min(attempt, 20));
      if (r.retry_after) wait = *r.retry_after;
      m_settings.sleep(std::min(wait, m_settings.backoff_cap));
    }
  }

 private:
  LlmSpec m_spec;
  ClientSettings m_settings;
  std::shared_ptr<HttpTransport> m_transport;
  std::unique_ptr<Wire> m_wire;
  Semaphore m_slots;
};

// The prompt goes to the program's stdin (through a file: CommandRunner has no
// stdin pipe), the reply is its stdout. The conversation is flattened: earlier
// turns are labelled, so a repair turn still shows the program what it said.
class CommandClient : public Client {
 public:
  CommandClient(LlmSpec spec, ClientSettings settings, CommandRunner& runner)
      : m_spec(std::move(spec)), m_settings(std::move(settings)), m_runner(runner),
        m_slots(m_settings.concurrency) {}

  json identity() const override { return {{"provider", "command"}, {"command", m_spec.command}}; }

  Reply complete(const Request& request) override {
    std::string prompt = request.system + "\n\n";
    for (size_t i = 0; i < request.messages.size(); ++i) {
      const auto& m = request.messages[i];
      if (request.messages.size() > 1) prompt += "### " + m.role + "\n\n";
      prompt += m.text + "\n\n";
    }
    namespace fs = std::filesystem;
    static std::atomic<int> counter{0};
    const fs::path file = fs::temp_directory_path() /
                          ("forge-prompt-" + std::to_string(::getpid()) + "-" +
                           std::to_string(counter++) + ".txt");
    write_file_atomic(file, prompt);
    Command c;
    c.argv = shell_argv("exec < '" + file.string() + "'\n" + m_spec.command);
    c.timeout_seconds = m_settings.total_timeout;
    c.cwd = m_settings.cwd;
    c.env["FORGE_LLM_VARIANT"] = std::to_string(request.variant + 1);  // as the prompt counts: 1..variants
    CommandResult r;
    {
      Slot slot(m_slots);
      r = m_runner.run(c);
    }
    std::error_code ec;
    fs::remove(file, ec);
    if (!r.ok())
      throw LlmError("command '" + one_line(m_spec.command, 80) + "': " + r.describe() +
                         (r.err.empty() ? "" : ": " + one_line(r.err)),
                     /*transient=*/true);
    Reply reply;
    reply.text = r.out;
    return reply;
  }

 private:
  LlmSpec m_spec;
  ClientSettings m_settings;
  CommandRunner& m_runner;
  Semaphore m_slots;
};

}  // namespace

std::unique_ptr<Client> make_client(const LlmSpec& spec, ClientSettings settings,
                                    std::shared_ptr<HttpTransport> transport,
                                    CommandRunner& runner) {
  fill_defaults(settings);
  if (spec.provider == "command")
    return std::make_unique<CommandClient>(spec, std::move(settings), runner);
  if (!transport) transport = make_curl_transport();
  return std::make_unique<HttpClient>(spec, std::move(settings), std::move(transport));
}

}  // namespace forge::llm
