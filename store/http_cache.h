// A shared cache over HTTP in front of a local store, speaking the protocol
// that bazel-remote and an nginx WebDAV location serve:
//
//   GET/HEAD/PUT  {url}/cas/<sha256>   an object: exactly the bytes whose sha256 it is
//   GET/PUT       {url}/ac/<key>       an action record, wrapped (below)
//
// Reads: the local store first; on a miss, GET from the server, check, and
// keep a copy in the local store. Writes: the local store, then a PUT to the
// server (best effort). Refs stay local: they are mutable names, not content.
//
// Nothing from the server is trusted. A CAS blob whose sha256 is not its name
// is a miss (and a warning); an action entry must be
//
//   "forge-ac 1 <key> <sha256 of record>\n" <record>
//
// naming the key it was asked for and matching the checksum, else it is a
// miss. A miss is recomputed like any other. bazel-remote validates /ac/
// uploads as ActionResult protobufs, which these entries are not: start it
// with --disable_http_ac_validation (its /cas/ check, sha256 of the body =
// the name, is one these uploads pass). nginx needs `dav_methods PUT;
// create_full_put_path on;` on the location.
//
// A server that is down or slow costs one bounded wait (connect 1 s, a whole
// request `timeout_seconds`): any transport failure or 5xx answer turns the
// cache off for the rest of this process (one warning) and the build goes on
// with the local store alone. 404 is a plain miss.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace forge::store {

struct HttpCacheOptions {
  std::string url;             // without a trailing '/', e.g. http://127.0.0.1:8080/forge
  double timeout_seconds = 5;  // per request; connect is capped at 1 s
};

// Counters, for tests and reports.
struct HttpCacheStats {
  int hits = 0;        // objects or actions served by the server
  int misses = 0;      // 404s
  int rejected = 0;    // bodies that failed their check
  int puts = 0;        // successful uploads
  bool down = false;   // the server was turned off for this process
};

class HttpCachedStore : public Store {
 public:
  virtual HttpCacheStats stats() const = 0;
};

// `local` is owned; warn as for every store (may be null: stderr).
std::unique_ptr<HttpCachedStore> make_http_cached_store(std::unique_ptr<Store> local,
                                                        HttpCacheOptions options, WarnFn warn);

// The wrapped form of an action record on the server, and its check (nullopt
// when `entry` is not a well-formed wrapper of `key`).
std::string wrap_action_entry(const std::string& key, std::string_view record);
std::optional<std::string> unwrap_action_entry(const std::string& key, std::string_view entry);

}  // namespace forge::store
