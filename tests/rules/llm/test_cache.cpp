// Cached replies (store action cache, keyed without the API key), the ledger,
// and the command provider run through a shell script.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "rules/llm/cache.h"
#include "store/store.h"
#include "tests/rules/llm/fake_server.h"
#include "tests/support.h"
#include "util/process.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::llm::Cache");

namespace {

class CountingClient : public llm::Client {
 public:
  int calls = 0;
  llm::Reply complete(const llm::Request& r) override {
    ++calls;
    llm::Reply reply;
    reply.text = "answer to " + r.messages.back().text;
    reply.usage = {1000, 500};
    return reply;
  }
  json identity() const override { return {{"provider", "openai"}, {"model", "m"}}; }
};

llm::Request ask(const std::string& text, int variant = 0) {
  llm::Request r;
  r.system = "sys";
  r.messages.push_back({"user", text});
  r.variant = variant;
  return r;
}

bool tree_contains(const fs::path& root, const std::string& needle) {
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the second ask is answered from the store and costs nothing") {
  auto store = store::make_memory_store();
  CountingClient inner;
  llm::CachedClient c(inner, *store);
  CHECK_FALSE(c.complete(ask("a")).cached);
  llm::Reply again = c.complete(ask("a"));
  CHECK(again.cached);
  CHECK(again.text == "answer to a");
  CHECK(again.usage.input_tokens == 1000);
  CHECK(inner.calls == 1);
  c.complete(ask("a", 1));  // another variant is another request
  CHECK(inner.calls == 2);
  CHECK(c.key(ask("a")) != c.key(ask("a", 1)));

  LlmSpec spec;
  spec.provider = "openai";
  spec.model = "m";
  llm::Ledger l = c.ledger();
  CHECK(l.to_json(spec) == json{{"provider", "openai"}, {"model", "m"}, {"requests", 2},
                                {"cached", 1}, {"input_tokens", 2000}, {"output_tokens", 1000},
                                {"prompt_chars", {{"total", 12}, {"largest", 4}}},
                                {"cost_usd", nullptr}});
  // Prompt sizes: every prompt asked, sent or cached; the sum and the largest.
  c.complete(ask(std::string(100, 'x')));
  llm::Ledger more = c.ledger();
  CHECK(more.prompt_chars == 12 + 103);
  CHECK(more.largest_prompt_chars == 103);
  llm::Ledger both = l;
  both += more;
  CHECK(both.prompt_chars == 12 + 115);
  CHECK(both.largest_prompt_chars == 103);
  spec.price_in = 3;
  spec.price_out = 15;
  CHECK(l.to_json(spec)["cost_usd"].get<double>() == doctest::Approx(0.021));
}

TEST_CASE("the command provider: prompt on stdin, reply on stdout, cached, no key in the store") {
  test::TempDir dir;
  test::write_text(dir / "model.sh",
                   "#!/bin/sh\n# echoes what it was asked, and its variant\n"
                   "echo \"variant $FORGE_LLM_VARIANT\"\ncat\n");
  fs::permissions(dir / "model.sh", fs::perms::owner_exec, fs::perm_options::add);
  std::unique_ptr<CommandRunner> runner = make_process_runner();
  LlmSpec spec;
  spec.provider = "command";
  spec.command = "'" + (dir / "model.sh").string() + "'";
  auto client = llm::make_client(spec, {}, nullptr, *runner);
  auto store = store::open_local_store(dir / "store", [](const std::string&) {});
  llm::CachedClient c(*client, *store);
  llm::Reply r = c.complete(ask("write a kernel", 2));
  CHECK(r.text == "variant 3\nsys\n\nwrite a kernel\n\n");  // index 2, counted from 1
  // A changed script is not asked again: the reply is the cached one.
  test::write_text(dir / "model.sh", "#!/bin/sh\necho changed\n");
  CHECK(c.complete(ask("write a kernel", 2)).text == r.text);

  spec.command = "echo oops >&2; exit 3";
  auto failing = llm::make_client(spec, {}, nullptr, *runner);
  try {
    failing->complete(ask("x"));
    FAIL("no error");
  } catch (const llm::LlmError& e) {
    CHECK(std::string(e.what()) == "command 'echo oops >&2; exit 3': exit code 3: oops");
  }
}

TEST_CASE("a planted API key reaches the server's header and nothing in the store") {
  test::TempDir dir;
  const std::string key = "sk-PLANTED-store-key-7a7a7a7a";
  test::FakeLlmServer server;
  server.push({200, R"({"choices": [{"message": {"content": "```cpp\nint x;\n```"}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 4}})"});
  server.push({401, "{\"error\": {\"message\": \"bad key " + key + "\"}}"});
  std::unique_ptr<CommandRunner> runner = make_process_runner();
  LlmSpec spec;
  spec.provider = "openai";
  spec.model = "m";
  spec.base_url = server.url();
  spec.api_key_env = "PLANTED_KEY";
  llm::ClientSettings s;
  s.getenv = [&](const std::string&) -> std::optional<std::string> { return key; };
  auto client = llm::make_client(spec, s, nullptr, *runner);
  auto store = store::open_local_store(dir / "store", [](const std::string&) {});
  llm::CachedClient c(*client, *store);
  CHECK(c.complete(ask("one")).text == "```cpp\nint x;\n```");
  CHECK(server.seen().at(0).header("Authorization") == "Bearer " + key);
  std::string message;
  try {
    c.complete(ask("two"));
  } catch (const llm::LlmError& e) {
    message = e.what();
  }
  CHECK(message.find("bad key ***") != std::string::npos);
  CHECK(message.find(key) == std::string::npos);
  CHECK_FALSE(tree_contains(dir / "store", key));
  CHECK(tree_contains(dir / "store", "int x;"));  // the reply itself is there
}

TEST_SUITE_END();
}  // namespace forge
