// forge serve's JSON API and HTTP server: routes, errors as JSON with status
// codes, no path traversal, the token, and no secret in any reply. The store is
// a real LocalStore in a temp dir holding one hand-written journal.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "serve/gui_api.h"
#include "serve/gui_server.h"
#include "store/local_store.h"
#include "tests/support.h"

using forge::test::TempDir;
using forge::test::write_text;
using nlohmann::json;
namespace serve = forge::serve;

namespace {

const std::string kSecret = "sk-planted-4f1e9a0c7b";  // what must never come back
const std::string kTarget = "m/_softmax/abc123";

struct Fixture {
  TempDir tmp;
  forge::store::LocalStore store{tmp / "store", [](const std::string&) {}};
  std::unique_ptr<serve::GuiApi> api;

  Fixture() {
    const std::string good =
        store.put_object("// softmax, two passes\nint forge_kernel() { return 0; }\n");
    const std::string bad =
        store.put_object("int forge_kernel() { return oops; } // key " + kSecret + "\n");
    const std::string eval_bad = store.put_object(
        json{{"verdict", "rejected"},
             {"reason", "compile_error"},
             {"compile", {{"ok", false}, {"log", "error: 'oops' was not declared; " + kSecret}}}}
            .dump());
    const std::string eval_good = store.put_object(
        json{{"verdict", "accepted"},
             {"verify", {{"cases", 16}, {"worst_abs", 1e-7}, {"worst_case", "sample 0"}}},
             {"bench", {{"speedup_eager", 1.5}, {"floor_pct", 70.0}}}}
            .dump());
    const std::string k1(64, '1'), k2(64, '2');
    store.put_action(k1, json{{"text", "a"}, {"input_tokens", 100}, {"output_tokens", 40}}.dump());
    store.put_action(k2, json{{"text", "b"}, {"input_tokens", 120}, {"output_tokens", 30}}.dump());
    json journal = {
        {"format", "forge-journal"},
        {"version", 1},
        {"context", "c"},
        {"search", json::object()},
        {"seconds", 2.0},
        {"records",
         {{{"i", 0},
           {"node", 1},
           {"parent", 0},
           {"action",
            {{"kind", "strategy"}, {"strategy", "rows"}, {"params", json::object()}, {"note", ""}}},
           {"outcome",
            {{"status", "ok"},
             {"speedup", 1.5},
             {"reason", "ok"},
             {"steps", {{"file", "rows.cpp"}, {"source", good}, {"evaluation", eval_good}}}}}},
          {{"i", 1},
           {"node", 2},
           {"parent", 1},
           {"action",
            {{"kind", "llm"}, {"strategy", ""}, {"params", {{"variant", 0}}}, {"note", kSecret}}},
           {"outcome",
            {{"status", "compile_error"},
             {"reason", "compile_error: " + kSecret},
             {"steps",
              {{"file", "llm.cpp"},
               {"source", bad},
               {"evaluation", eval_bad},
               {"llm", k1 + "," + k2}}}}}}}}};
    store.put_ref("journal/" + kTarget, journal.dump());
    serve::ApiConfig config;
    config.store_root = tmp / "store";
    config.secrets = {kSecret, "x"};  // too short a value is not redacted (it would blank text)
    api = std::make_unique<serve::GuiApi>(store, config);
    api->set_overview({{"targets", json::array({{{"id", kTarget}, {"share", 0.5}}})},
                       {"notes", {"env has " + kSecret}}});
  }

  std::pair<int, json> get(const std::string& path,
                           std::multimap<std::string, std::string> params = {}) {
    serve::ApiReply r = api->get(path, params);
    CHECK(r.body.find(kSecret) == std::string::npos);
    return {r.status, json::parse(r.body)};
  }
};

}  // namespace

TEST_SUITE_BEGIN("serve::GuiApi");

TEST_CASE("overview, tree, node, ledger: shapes") {
  Fixture f;
  auto [s1, overview] = f.get("/api/overview");
  CHECK(s1 == 200);
  CHECK(overview["journals"] == json::array({kTarget}));
  CHECK(overview["notes"][0] == "env has ***");

  auto [s2, tree] = f.get("/api/tree", {{"target", kTarget}});
  CHECK(s2 == 200);
  REQUIRE(tree["nodes"].size() == 3);
  CHECK(tree["nodes"][0]["kind"] == "stock");
  CHECK(tree["nodes"][2]["status"] == "compile_error");
  CHECK(tree["nodes"][2]["parent"] == 1);
  CHECK(tree["progress"][1]["best"] == 1.5);
  CHECK(tree["progress"][1]["speedup"].is_null());

  auto [s3, node] = f.get("/api/node", {{"target", kTarget}, {"node", "2"}});
  CHECK(s3 == 200);
  CHECK(node["source"].get<std::string>().find("return oops") != std::string::npos);
  CHECK(node["source"].get<std::string>().find("***") != std::string::npos);
  CHECK(node["parent_source"].get<std::string>().find("two passes") != std::string::npos);
  CHECK(node["evaluation"]["compile"]["ok"] == false);
  CHECK(node["action"]["note"] == "***");

  auto [s4, ledger] = f.get("/api/ledger");
  CHECK(s4 == 200);
  CHECK(ledger["requests"] == 2);
  CHECK(ledger["input_tokens"] == 220);
  CHECK(ledger["output_tokens"] == 70);
  CHECK(ledger["cost_usd"].is_null());  // no prices set
  CHECK(ledger["targets"][0]["nodes"][0]["node"] == 2);

  auto [s5, history] = f.get("/api/history");
  CHECK(s5 == 200);
  CHECK(history["commits"].empty());
}

// The plot's "best" is the kernel the target ships (the tip of the history's
// improvement chain), not the running maximum: a kernel faster only within
// both spreads does not replace the tip, in the plot as in the package.
TEST_CASE("the progress plot's best follows the shipped kernel, not the fastest median") {
  TempDir tmp;
  forge::store::LocalStore store{tmp / "store", [](const std::string&) {}};
  auto kernel = [&](int i, const char* status, double speedup, double median, double spread) {
    const std::string eval = store.put_object(
        json{{"verdict", "accepted"}, {"bench", {{"candidate_us", {{"median", median}, {"spread", spread}}}}}}
            .dump());
    return json{{"i", i},
                {"node", i + 1},
                {"parent", 0},
                {"action", {{"kind", "strategy"}, {"strategy", "rows"}, {"params", {{"V", i}}}, {"note", ""}}},
                {"outcome",
                 {{"status", status}, {"speedup", speedup}, {"reason", status}, {"steps", {{"evaluation", eval}}}}}};
  };
  json records = json::array({kernel(0, "slower", 0.9, 11.0, 0.5),  // verified, not faster than stock
                              kernel(1, "ok", 1.5, 10.0, 1.0),      // the first kernel: the tip
                              kernel(2, "ok", 1.6, 9.5, 1.0),       // 0.5 us faster, within 2 us of spread
                              kernel(3, "ok", 2.0, 7.0, 0.5)});     // 3 us faster: the new tip
  store.put_ref("journal/" + kTarget, json{{"format", "forge-journal"},
                                           {"version", 1},
                                           {"context", "c"},
                                           {"search", json::object()},
                                           {"seconds", 1.0},
                                           {"records", records}}
                                          .dump());
  serve::ApiConfig config;
  config.store_root = tmp / "store";
  serve::GuiApi api(store, config);
  json tree = json::parse(api.get("/api/tree", {{"target", kTarget}}).body);
  REQUIRE(tree["progress"].size() == 4);
  CHECK(tree["progress"][0]["best"] == 1.0);
  CHECK(tree["progress"][1]["best"] == 1.5);
  CHECK(tree["progress"][2]["best"] == 1.5);  // the running maximum would say 1.6
  CHECK(tree["progress"][2]["speedup"] == 1.6);
  CHECK(tree["progress"][3]["best"] == 2.0);
}

TEST_CASE("errors are JSON with status codes") {
  Fixture f;
  CHECK(f.get("/api/nope").first == 404);
  CHECK(f.get("/api/nope").second["error"] == "no such API route: /api/nope");
  CHECK(f.get("/api/tree").first == 400);
  CHECK(f.get("/api/tree").second["error"] == "missing parameter 'target'");
  CHECK(f.get("/api/tree", {{"target", "m/x/none00"}}).first == 404);
  CHECK(f.get("/api/node", {{"target", kTarget}, {"node", "9"}}).first == 404);
  CHECK(f.get("/api/node", {{"target", kTarget}, {"node", "-1"}}).first == 400);
  CHECK(f.get("/api/object/" + std::string(64, 'a')).first == 404);
  CHECK(f.get("/api/history/diff", {{"rev", "abc"}}).first == 404);
  CHECK(f.get("/api/history/diff", {{"rev", "HEAD;rm"}}).first == 400);
}

TEST_CASE("no path traversal through target ids or object digests") {
  Fixture f;
  write_text(f.tmp / "store" / "secret.txt", kSecret);
  for (const std::string bad : {"../secret.txt", "../../secret.txt", "m/../../secret.txt",
                                "/etc/passwd", "m/./x", "m//x", "m\\..\\x"}) {
    CAPTURE(bad);
    CHECK(f.get("/api/tree", {{"target", bad}}).first == 400);
    CHECK(f.get("/api/node", {{"target", bad}, {"node", "1"}}).first == 400);
  }
  CHECK(f.get("/api/object/../../etc/passwd").first == 400);
  CHECK(f.get("/api/object/" + std::string(64, 'A')).first == 400);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("serve::GuiServer");

namespace {

struct Running {
  Fixture f;
  TempDir dist;
  std::unique_ptr<serve::StoreWatch> watch;
  std::unique_ptr<serve::GuiServer> server;
  std::thread thread;
  int port = 0;

  explicit Running(const std::string& token) {
    write_text(dist / "index.html", "<!doctype html><title>forge</title>");
    write_text(dist / "app.js", "console.log('forge')");
    write_text(dist.path().parent_path() / "forge.yaml.probe", kSecret);
    serve::ServeOptions o;
    o.port = 0;
    o.token = token;
    o.static_dir = dist.path();
    watch = std::make_unique<serve::StoreWatch>(f.tmp / "store", "", "refs/heads/forge/kernels");
    server = std::make_unique<serve::GuiServer>(*f.api, *watch, o, nullptr);
    port = server->bind();
    thread = std::thread([this] { server->run(); });
  }
  ~Running() {
    server->stop();
    thread.join();
    std::filesystem::remove(dist.path().parent_path() / "forge.yaml.probe");
  }
  httplib::Result get(const std::string& path, httplib::Headers headers = {}) {
    httplib::Client c("127.0.0.1", port);
    return c.Get(path.c_str(), headers);
  }
};

}  // namespace

TEST_CASE("static files and API over HTTP; traversal refused") {
  Running r("");
  auto index = r.get("/");
  REQUIRE(index);
  CHECK(index->status == 200);
  CHECK(index->body.find("<title>forge</title>") != std::string::npos);
  CHECK(r.get("/static/app.js")->status == 200);
  CHECK(r.get("/static/app.js")->get_header_value("Content-Type").rfind("text/javascript", 0) == 0);
  for (const std::string bad :
       {"/static/../forge.yaml.probe", "/static/%2e%2e/forge.yaml.probe",
        "/static/..%2fforge.yaml.probe", "/static//etc/passwd", "/static/nope.js"}) {
    CAPTURE(bad);
    auto res = r.get(bad);
    REQUIRE(res);
    CHECK(res->status == 404);
    CHECK(res->get_header_value("Content-Type") == "application/json");
    CHECK(res->body.find(kSecret) == std::string::npos);
    CHECK(json::parse(res->body).contains("error"));
  }
  auto obj = r.get("/api/object/../../etc/passwd");
  REQUIRE(obj);
  CHECK(obj->status >= 400);
  CHECK(obj->body.find("root:") == std::string::npos);
  auto tree = r.get("/api/tree?target=" + kTarget);
  CHECK(tree->status == 200);
  CHECK(tree->body.find(kSecret) == std::string::npos);
  CHECK(r.get("/nope")->status == 404);
  CHECK(json::parse(r.get("/nope")->body)["error"] == "no such route: /nope");
  // A page on another site that rebinds its name to 127.0.0.1 is refused.
  CHECK(r.get("/api/overview", {{"Host", "evil.example:7878"}})->status == 403);
}

TEST_CASE("with a token, every request must carry it") {
  Running r("0123456789abcdef0123456789abcdef");
  CHECK(r.get("/")->status == 403);
  CHECK(r.get("/api/overview")->status == 403);
  CHECK(r.get("/api/overview?token=wrong")->status == 403);
  auto ok = r.get("/?token=0123456789abcdef0123456789abcdef");
  CHECK(ok->status == 200);
  CHECK(ok->get_header_value("Set-Cookie").find("HttpOnly") != std::string::npos);
  CHECK(r.get("/api/overview", {{"Cookie", "forge_token=0123456789abcdef0123456789abcdef"}})
            ->status == 200);
}

TEST_CASE("the event stream delivers what the hub publishes") {
  Running r("");
  std::string seen;
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    r.server->events().publish("journal", {{"target", kTarget}});
  });
  httplib::Client c("127.0.0.1", r.port);
  c.set_read_timeout(5, 0);
  c.Get("/events", [&](const char* data, size_t n) {
    seen.append(data, n);
    return seen.find("event: journal") == std::string::npos;  // stop once it came
  });
  publisher.join();
  CHECK(seen.find("event: hello") != std::string::npos);
  CHECK(seen.find("event: journal\ndata: {\"target\":\"" + kTarget + "\"}") != std::string::npos);
}

TEST_SUITE_END();
