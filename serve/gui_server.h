// `forge serve`'s HTTP side (cpp-httplib): the JSON API (serve/gui_api.h), the
// built front end (gui/dist) and one server-sent-event stream.
//
//   GET /                 index.html
//   GET /static/NAME      a file of the front end; NAME may not hold "..", "\" or
//                         start with "/", and must resolve inside the folder
//   GET /api/...          GuiApi::get
//   GET /events           text/event-stream: "journal" {target}, "history" {},
//                         "overview" {} events, a ": ping" comment every 15 s
//
// Live updates: a thread polls the store (StoreWatch) every poll_seconds and
// publishes what changed; each /events connection waits on the hub and writes
// what is newer than what it sent. The browser never polls.
//
// Security: with a token, every request must carry it (?token=, or the
// forge_token cookie that a page load with a valid ?token= sets); compared in
// constant time. Without one (loopback only, enforced by cmd_serve), the Host
// header must name a loopback host, so a web page on another site cannot read
// the API through DNS rebinding. Replies are never cached by the browser.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve/gui_api.h"
#include "serve/store_watch.h"

namespace httplib {
class Server;
}

namespace forge::serve {

struct ServeOptions {
  std::string bind = "127.0.0.1";
  int port = 7878;                   // 0: any free port
  std::string token;                 // "" = none (loopback only)
  std::filesystem::path static_dir;  // the built front end (gui/dist)
  double poll_seconds = 0.5;
  double overview_min_seconds = 2;  // at most one overview refresh per this many seconds
};

// Events for /events: a sequence number each, the last 256 kept.
class EventHub {
 public:
  struct Event {
    long seq;
    std::string type;
    std::string data;  // JSON text
  };
  void publish(const std::string& type, const nlohmann::json& data);
  // Events after `seq`, waiting up to `timeout_ms` for one; empty on timeout or close().
  std::vector<Event> wait_after(long seq, int timeout_ms);
  long last() const;
  void close();

 private:
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Event> m_events;
  long m_seq = 0;
  bool m_closed = false;
};

class GuiServer {
 public:
  // `refresh_overview` recomputes the overview snapshot (a dry-run build); it
  // runs on the poll thread when the store changed.
  GuiServer(GuiApi& api, StoreWatch& watch, ServeOptions options,
            std::function<nlohmann::json()> refresh_overview);
  ~GuiServer();

  // Binds; returns the port (throws forge::Error when it cannot).
  int bind();
  // Serves until stop(): the poll thread and the listener; joins both.
  void run();
  void stop();  // from any thread (a signal waiter, a test); returns at once
  EventHub& events() { return m_events; }

 private:
  void routes();
  void poll_loop();
  bool authorized(const std::string& host, const std::string& query_token,
                  const std::string& cookie) const;

  GuiApi& m_api;
  StoreWatch& m_watch;
  ServeOptions m_options;
  std::function<nlohmann::json()> m_refresh;
  std::unique_ptr<httplib::Server> m_server;
  EventHub m_events;
  std::atomic<bool> m_stopping{false};
  std::thread m_poller;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& host);

// A fresh random token (32 hex chars, from /dev/urandom).
std::string make_token();

}  // namespace forge::serve
