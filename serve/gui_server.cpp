#include "serve/gui_server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace forge::serve {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- events -----------------------------------------------------------------

void EventHub::publish(const std::string& type, const json& data) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_events.push_back({++m_seq, type, data.dump()});
    while (m_events.size() > 256) m_events.pop_front();
  }
  m_cv.notify_all();
}

std::vector<EventHub::Event> EventHub::wait_after(long seq, int timeout_ms) {
  std::unique_lock<std::mutex> lock(m_mutex);
  m_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                [&] { return m_closed || m_seq > seq; });
  std::vector<Event> out;
  if (m_closed) return out;
  for (const auto& e : m_events)
    if (e.seq > seq) out.push_back(e);
  return out;
}

long EventHub::last() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_seq;
}

void EventHub::close() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_closed = true;
  }
  m_cv.notify_all();
}

// ---- helpers ----------------------------------------------------------------

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

std::string make_token() {
  unsigned char bytes[16] = {};
  std::ifstream in("/dev/urandom", std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    throw Error("cannot read /dev/urandom for the access token");
  std::string hex;
  char buf[3];
  for (unsigned char b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

namespace {

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The host part of a Host header: "127.0.0.1:7878" -> "127.0.0.1", "[::1]:80" -> "[::1]".
std::string host_name(const std::string& header) {
  if (!header.empty() && header.front() == '[') return header.substr(0, header.find(']') + 1);
  return header.substr(0, header.find(':'));
}

std::string cookie_value(const std::string& cookies, const std::string& name) {
  std::istringstream in(cookies);
  std::string part;
  while (std::getline(in, part, ';')) {
    size_t start = part.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    part = part.substr(start);
    if (part.rfind(name + "=", 0) == 0) return part.substr(name.size() + 1);
  }
  return "";
}

const char* content_type(const fs::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".woff2") return "font/woff2";
  return "application/octet-stream";
}

// The file NAME names inside `dir`, or "" when NAME could leave it.
fs::path static_file(const fs::path& dir, const std::string& name) {
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string::npos ||
      name.find('\0') != std::string::npos)
    return {};
  for (const auto& part : fs::path(name))
    if (part == ".." || part == ".") return {};
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return {};
  const fs::path file = fs::weakly_canonical(root / name, ec);
  if (ec) return {};
  auto rel = file.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") return {};
  if (!fs::is_regular_file(file, ec)) return {};
  return file;
}

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

}  // namespace

// ---- the server -------------------------------------------------------------

GuiServer::GuiServer(GuiApi& api, StoreWatch& watch, ServeOptions options,
                     std::function<json()> refresh_overview)
    : m_api(api),
      m_watch(watch),
      m_options(std::move(options)),
      m_refresh(std::move(refresh_overview)),
      m_server(std::make_unique<httplib::Server>()) {
  // Each open /events stream holds a worker thread.
  m_server->new_task_queue = [] { return new httplib::ThreadPool(32); };
  routes();
}

GuiServer::~GuiServer() {
  stop();
  if (m_poller.joinable()) m_poller.join();
}

bool GuiServer::authorized(const std::string& host, const std::string& query_token,
                           const std::string& cookie) const {
  if (m_options.token.empty()) return is_loopback(host_name(host));
  return same_secret(query_token, m_options.token) ||
         same_secret(cookie_value(cookie, "forge_token"), m_options.token);
}

void GuiServer::routes() {
  httplib::Server& s = *m_server;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    const std::string token = req.has_param("token") ? req.get_param_value("token") : "";
    if (!authorized(req.get_header_value("Host"), token, req.get_header_value("Cookie"))) {
      send_json(
          res, 403,
          m_api.redact(api_error(m_options.token.empty() ? "this server answers loopback hosts only"
                                                         : "missing or wrong access token")
                           .dump()));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!m_options.token.empty() && !token.empty())
      res.set_header("Set-Cookie",
                     "forge_token=" + m_options.token + "; Path=/; HttpOnly; SameSite=Strict");
    if (req.method != "GET" && req.method != "HEAD") {
      send_json(res, 405, api_error("only GET is served").dump());
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  auto serve_file = [this](const std::string& name, httplib::Response& res) {
    fs::path file = static_file(m_options.static_dir, name);
    if (file.empty()) return send_json(res, 404, api_error("no such file: " + name).dump());
    std::ifstream in(file, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    res.set_content(buf.str(), content_type(file));
  };
  s.Get("/", [serve_file](const httplib::Request&, httplib::Response& res) {
    serve_file("index.html", res);
  });
  s.Get(R"(/static/(.*))", [serve_file](const httplib::Request& req, httplib::Response& res) {
    serve_file(req.matches[1], res);
  });
  s.Get(R"(/api/.*)", [this](const httplib::Request& req, httplib::Response& res) {
    std::multimap<std::string, std::string> params(req.params.begin(), req.params.end());
    ApiReply reply = m_api.get(req.path, params);
    send_json(res, reply.status, reply.body);
  });
  s.Get("/events", [this](const httplib::Request& req, httplib::Response& res) {
    long start = m_events.last();
    if (req.has_header("Last-Event-ID")) {
      try {
        start = std::stol(req.get_header_value("Last-Event-ID"));
      } catch (const std::exception&) {
      }
    }
    auto seen = std::make_shared<long>(start);
    auto hello = std::make_shared<bool>(false);
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [this, seen, hello](size_t, httplib::DataSink& sink) {
          if (m_stopping) return false;
          std::string out;
          if (!*hello) {
            *hello = true;
            out = "retry: 2000\nevent: hello\ndata: {\"seq\":" + std::to_string(*seen) + "}\n\n";
          } else {
            auto events = m_events.wait_after(*seen, 15000);
            if (m_stopping) return false;
            for (const auto& e : events) {
              out += "id: " + std::to_string(e.seq) + "\nevent: " + e.type +
                     "\ndata: " + m_api.redact(e.data) + "\n\n";
              *seen = e.seq;
            }
            if (out.empty()) out = ": ping\n\n";
          }
          return sink.write(out.data(), out.size());
        });
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty() || res.get_header_value("Content-Type") != "application/json")
      send_json(res, res.status, api_error("no such route: " + req.path).dump());
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_json(res, 500, api_error(what).dump());
      });
}

int GuiServer::bind() {
  int port = m_options.port == 0
                 ? m_server->bind_to_any_port(m_options.bind)
                 : (m_server->bind_to_port(m_options.bind, m_options.port) ? m_options.port : -1);
  if (port < 0)
    throw Error("cannot listen on " + m_options.bind + ":" + std::to_string(m_options.port) +
                " (in use, or not an address of this machine)");
  return port;
}

void GuiServer::poll_loop() {
  using clock = std::chrono::steady_clock;
  m_watch.poll();  // what exists now is the baseline
  bool dirty = false;
  auto last_refresh = clock::now();
  while (!m_stopping) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int>(m_options.poll_seconds * 1000)));
    if (m_stopping) break;
    StoreChanges c = m_watch.poll();
    for (const auto& t : c.journals) m_events.publish("journal", {{"target", t}});
    if (c.history) m_events.publish("history", json::object());
    dirty = dirty || c.any();
    const double since = std::chrono::duration<double>(clock::now() - last_refresh).count();
    if (dirty && m_refresh && since >= m_options.overview_min_seconds) {
      dirty = false;
      try {
        m_api.set_overview(m_refresh());
        m_events.publish("overview", json::object());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "forge serve: overview refresh failed: %s\n", e.what());
      }
      last_refresh = clock::now();
    }
  }
}

void GuiServer::run() {
  m_poller = std::thread([this] { poll_loop(); });
  if (!m_stopping) m_server->listen_after_bind();
  stop();
  m_poller.join();
}

// Only signals: run() joins the poller on its own thread.
void GuiServer::stop() {
  m_stopping = true;
  m_events.close();
  m_server->stop();
}

}  // namespace forge::serve
