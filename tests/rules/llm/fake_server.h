// A loopback HTTP server with scripted replies, for the LLM client tests: it
// speaks whatever the script says (a provider's JSON, a 429 with Retry-After, a
// 500, a slow reply, garbage) and records every request it got.
#pragma once

#include <httplib.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace forge::test {

struct ScriptedReply {
  int status = 200;
  std::string body;
  std::string retry_after;  // "" = no header
  double delay = 0;         // seconds before answering
};

struct SeenRequest {
  std::string path;
  std::string body;
  std::multimap<std::string, std::string> headers;
  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
    return "";
  }
};

class FakeLlmServer {
 public:
  FakeLlmServer() {
    m_server.Post(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      ScriptedReply r;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_seen.push_back({req.path, req.body, {req.headers.begin(), req.headers.end()}});
        if (!m_script.empty()) {
          r = m_script.front();
          m_script.pop_front();
        } else {
          r = {500, R"({"error": {"message": "script ran out"}})"};
        }
      }
      if (r.delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(r.delay));
      res.status = r.status;
      if (!r.retry_after.empty()) res.set_header("Retry-After", r.retry_after);
      res.set_content(r.body, "application/json");
    });
    m_port = m_server.bind_to_any_port("127.0.0.1");
    m_thread = std::thread([this] { m_server.listen_after_bind(); });
  }
  ~FakeLlmServer() {
    m_server.stop();
    m_thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }
  void push(ScriptedReply r) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_script.push_back(std::move(r));
  }
  std::vector<SeenRequest> seen() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_seen;
  }

 private:
  httplib::Server m_server;
  int m_port = 0;
  std::thread m_thread;
  std::mutex m_mutex;
  std::deque<ScriptedReply> m_script;
  std::vector<SeenRequest> m_seen;
};

}  // namespace forge::test
