// The HTTP cache layer against an in-process server (cpp-httplib) that keeps
// blobs in a map, so these run anywhere; tests/rules/cluster/test_slurm_build.cpp
// repeats the essentials against nginx WebDAV and whole forge builds.
#include <httplib.h>

#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <thread>

#include "store/http_cache.h"
#include "tests/support.h"
#include "util/hash.h"

namespace forge::store {

namespace {

class BlobServer {
 public:
  BlobServer() {
    m_server.Get(R"(/forge/(cas|ac)/(\w+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(m_mutex);
      ++gets;
      auto it = blobs.find(req.path);
      if (it == blobs.end()) {
        res.status = 404;
        return;
      }
      res.set_content(it->second, "application/octet-stream");
    });
    m_server.Put(R"(/forge/(cas|ac)/(\w+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(m_mutex);
      blobs[req.path] = req.body;
      res.status = 201;
    });
    m_port = m_server.bind_to_any_port("127.0.0.1");
    m_thread = std::thread([this] { m_server.listen_after_bind(); });
    // bind_to_any_port() already listens: connections queue until the loop runs.
  }
  ~BlobServer() {
    while (!m_server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m_server.stop();
    m_thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port) + "/forge"; }

  std::map<std::string, std::string> blobs;  // path -> body
  int gets = 0;

 private:
  httplib::Server m_server;
  int m_port = 0;
  std::thread m_thread;
  std::mutex m_mutex;
};

const std::string kKey(64, 'a');

}  // namespace

TEST_SUITE_BEGIN("store::HttpCache");

TEST_CASE("action entries are wrapped with their key and checksum") {
  const std::string e = wrap_action_entry(kKey, "{\"status\":\"ok\"}");
  CHECK(e.rfind("forge-ac 1 " + kKey + " " + sha256_hex("{\"status\":\"ok\"}") + "\n", 0) == 0);
  CHECK(unwrap_action_entry(kKey, e) == "{\"status\":\"ok\"}");
  CHECK_FALSE(unwrap_action_entry(std::string(64, 'b'), e));  // another key's entry
  std::string bad = e;
  bad.back() = 'X';
  CHECK_FALSE(unwrap_action_entry(kKey, bad));
  for (size_t n = 0; n < e.size(); ++n) CHECK_FALSE(unwrap_action_entry(kKey, e.substr(0, n)));
}

TEST_CASE("a second store finds what the first uploaded; blobs are checked") {
  BlobServer server;
  test::TempDir dir;
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  auto a = make_http_cached_store(open_local_store(dir / "a", warn), {server.url(), 5}, warn);
  auto b = make_http_cached_store(open_local_store(dir / "b", warn), {server.url(), 5}, warn);

  const std::string digest = a->put_object("kernel bytes");
  a->put_action(kKey, "{\"status\":\"ok\"}");
  CHECK(a->stats().puts == 2);
  CHECK(server.blobs.count("/forge/cas/" + digest) == 1);

  CHECK(b->get_object(digest) == "kernel bytes");
  CHECK(b->get_action(kKey) == "{\"status\":\"ok\"}");
  CHECK(b->stats().hits == 2);
  const int gets = server.gets;
  CHECK(b->get_object(digest) == "kernel bytes");  // now local
  CHECK(server.gets == gets);

  SUBCASE("a corrupt object or action on the server is a miss") {
    auto c = make_http_cached_store(open_local_store(dir / "c", warn), {server.url(), 5}, warn);
    server.blobs["/forge/cas/" + digest] = "kernel bytes, tampered";
    server.blobs["/forge/ac/" + kKey] = wrap_action_entry(kKey, "{}").substr(0, 90) + "junk";
    CHECK_FALSE(c->get_object(digest));
    CHECK_FALSE(c->has_object(digest));
    CHECK_FALSE(c->get_action(kKey));
    CHECK(c->stats().rejected == 3);
    CHECK(c->stats().down == false);
    CHECK(warnings.back().find("recomputing") != std::string::npos);
  }
  SUBCASE("a missing entry is a plain miss") {
    CHECK_FALSE(b->get_action(std::string(64, 'c')));
    CHECK(b->stats().misses == 1);
    CHECK(warnings.empty());
  }
  CHECK_FALSE(b->get_ref("x"));
}

TEST_CASE("a cache that is down costs one bounded wait, then is off for the build") {
  test::TempDir dir;
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  const std::string url = "http://127.0.0.1:1/forge";  // nothing listens on port 1
  auto s = make_http_cached_store(open_local_store(dir / "s", warn), {url, 2}, warn);
  const auto start = std::chrono::steady_clock::now();
  const std::string d = s->put_object("x");
  CHECK(s->get_object(d) == "x");  // local
  CHECK_FALSE(s->get_object(std::string(64, 'e')));
  CHECK_FALSE(s->get_action(kKey));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 3);
  CHECK(s->stats().down);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("not answering") != std::string::npos);
}

TEST_CASE("a slow cache times out within timeout_seconds and is turned off") {
  httplib::Server slow;
  slow.Get(R"(/forge/.*)", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    res.status = 404;
  });
  int port = slow.bind_to_any_port("127.0.0.1");
  std::thread t([&] { slow.listen_after_bind(); });
  test::TempDir dir;
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  auto s = make_http_cached_store(open_local_store(dir / "s", warn),
                                  {"http://127.0.0.1:" + std::to_string(port) + "/forge", 0.5}, warn);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(s->get_action(kKey));
  CHECK_FALSE(s->get_action(kKey));  // off: no second wait
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 1.5);
  CHECK(s->stats().down);
  while (!slow.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  slow.stop();
  t.join();
}

TEST_SUITE_END();

}  // namespace forge::store
