// StoreWatch: what a build in another process changed, by stat only.
#include <chrono>
#include <thread>

#include "serve/store_watch.h"
#include "store/local_store.h"
#include "tests/support.h"

using forge::test::TempDir;

TEST_SUITE_BEGIN("serve::StoreWatch");

TEST_CASE("journals, explain refs and the history ref are reported once per change") {
  TempDir tmp;
  forge::store::LocalStore store(tmp / "store", [](const std::string&) {});
  std::filesystem::create_directories(tmp / "git" / "refs" / "heads" / "forge");
  forge::serve::StoreWatch watch(tmp / "store", tmp / "git", "refs/heads/forge/kernels");
  CHECK_FALSE(watch.poll().any());

  store.put_ref("journal/m/_softmax/abc123", "{}");
  auto c = watch.poll();
  CHECK(c.journals == std::vector<std::string>{"m/_softmax/abc123"});
  CHECK_FALSE(c.history);
  CHECK_FALSE(watch.poll().any());  // nothing new

  store.put_ref("journal/m/_softmax/abc123", "{\"records\": []}");  // replaced whole: new inode
  CHECK(watch.poll().journals == std::vector<std::string>{"m/_softmax/abc123"});

  forge::test::write_text(tmp / "git" / "refs" / "heads" / "forge" / "kernels", "0123\n");
  c = watch.poll();
  CHECK(c.history);
  CHECK(c.journals.empty());

  store.put_ref("explain/capture/m", "{}");
  c = watch.poll();
  CHECK(c.other);
  CHECK_FALSE(c.history);

  // A writer's temp file is not a change.
  forge::test::write_text(tmp / "store" / "refs" / "journal" / "m" / "x.tmp.1.2", "");
  CHECK_FALSE(watch.poll().any());
}

TEST_SUITE_END();
