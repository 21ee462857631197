#include "store/store.h"
#include "tests/store/store_test_util.h"

TEST_SUITE_BEGIN("store::MemoryStore");

TEST_CASE("the memory store keeps the Store contract") {
  auto store = forge::store::make_memory_store();
  forge::test::check_store_contract(*store);
}

TEST_CASE("memory stores are independent") {
  auto a = forge::store::make_memory_store();
  auto b = forge::store::make_memory_store();
  std::string digest = a->put_object("only in a");
  CHECK(a->has_object(digest));
  CHECK_FALSE(b->has_object(digest));
}

TEST_SUITE_END();
