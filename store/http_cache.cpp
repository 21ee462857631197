#include "store/http_cache.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "util/hash.h"

namespace forge::store {

namespace {

constexpr std::string_view kAcMagic = "forge-ac 1 ";

struct Response {
  bool transport_ok = false;  // a status line came back
  long status = 0;
  std::string body;
  std::string error;  // curl's words when !transport_ok
};

size_t collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

struct Upload {
  std::string_view data;
  size_t offset = 0;
};

size_t feed(char* buffer, size_t size, size_t n, void* user) {
  auto* up = static_cast<Upload*>(user);
  size_t take = std::min(size * n, up->data.size() - up->offset);
  std::copy_n(up->data.data() + up->offset, take, buffer);
  up->offset += take;
  return take;
}

class HttpCache final : public HttpCachedStore {
 public:
  HttpCache(std::unique_ptr<Store> local, HttpCacheOptions options, WarnFn warn)
      : m_local(std::move(local)), m_options(std::move(options)), m_warn(std::move(warn)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    while (!m_options.url.empty() && m_options.url.back() == '/') m_options.url.pop_back();
  }

  std::string put_object(std::string_view bytes) override {
    std::string digest = m_local->put_object(bytes);
    upload("cas/" + digest, bytes);
    return digest;
  }

  std::optional<std::string> get_object(const std::string& digest) override {
    if (auto hit = m_local->get_object(digest)) return hit;
    auto body = fetch("cas/" + digest);
    if (!body) return std::nullopt;
    if (sha256_hex(*body) != digest) {
      reject("object " + digest.substr(0, 12) + " from the cache does not hash to its name");
      return std::nullopt;
    }
    m_local->put_object(*body);
    ++m_hits;
    return body;
  }

  bool has_object(const std::string& digest) override {
    // Fetched (and checked) now rather than promised: a later get_object then
    // finds it locally.
    return m_local->has_object(digest) || get_object(digest).has_value();
  }

  void put_action(const std::string& key, std::string_view record) override {
    m_local->put_action(key, record);
    upload("ac/" + key, wrap_action_entry(key, record));
  }

  std::optional<std::string> get_action(const std::string& key) override {
    if (auto hit = m_local->get_action(key)) return hit;
    auto body = fetch("ac/" + key);
    if (!body) return std::nullopt;
    auto record = unwrap_action_entry(key, *body);
    if (!record) {
      reject("action " + key.substr(0, 12) + " from the cache fails its checksum");
      return std::nullopt;
    }
    m_local->put_action(key, *record);
    ++m_hits;
    return record;
  }

  void put_ref(const std::string& name, std::string_view value) override {
    m_local->put_ref(name, value);
  }
  std::optional<std::string> get_ref(const std::string& name) override {
    return m_local->get_ref(name);
  }

  HttpCacheStats stats() const override {
    return {m_hits.load(), m_misses.load(), m_rejected.load(), m_puts.load(), m_down.load()};
  }

 private:
  Response request(const std::string& method, const std::string& path, std::string_view body) {
    Response r;
    CURL* curl = curl_easy_init();
    if (!curl) {
      r.error = "curl_easy_init failed";
      return r;
    }
    const std::string url = m_options.url + "/" + path;
    Upload up{body};
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max(0.1, m_options.timeout_seconds) * 1000));
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
    if (method == "PUT") {
      curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl, CURLOPT_READFUNCTION, &feed);
      curl_easy_setopt(curl, CURLOPT_READDATA, &up);
      curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
    } else if (method == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    }
    CURLcode rc = curl_easy_perform(curl);
    if (rc == CURLE_OK) {
      r.transport_ok = true;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    } else {
      r.error = *error ? error : curl_easy_strerror(rc);
    }
    curl_easy_cleanup(curl);
    return r;
  }

  // The body at `path`, or nullopt (404, or the cache is off).
  std::optional<std::string> fetch(const std::string& path) {
    if (m_down) return std::nullopt;
    Response r = request("GET", path, {});
    if (r.transport_ok && r.status == 200) return std::move(r.body);
    if (r.transport_ok && r.status < 500) {
      ++m_misses;
      return std::nullopt;
    }
    go_down(r);
    return std::nullopt;
  }

  void upload(const std::string& path, std::string_view body) {
    if (m_down) return;
    Response r = request("PUT", path, body);
    if (r.transport_ok && r.status >= 200 && r.status < 300) {
      ++m_puts;
      return;
    }
    if (r.transport_ok && r.status < 500) {
      // Refused (e.g. bazel-remote validating /ac/ as protobuf): say so once.
      if (!m_refused.exchange(true))
        warn("the cache at " + m_options.url + " refused a PUT of " + path.substr(0, 16) +
             "… (HTTP " + std::to_string(r.status) + "); uploads continue, results stay local");
      return;
    }
    go_down(r);
  }

  void go_down(const Response& r) {
    if (m_down.exchange(true)) return;
    warn("the cache at " + m_options.url + " is not answering (" +
         (r.transport_ok ? "HTTP " + std::to_string(r.status) : r.error) +
         "); continuing without it for this build");
  }

  void reject(const std::string& why) {
    ++m_rejected;
    warn(why + "; recomputing");
  }

  void warn(const std::string& m) {
    if (m_warn)
      m_warn(m);
    else
      std::fprintf(stderr, "forge: warning: %s\n", m.c_str());
  }

  std::unique_ptr<Store> m_local;
  HttpCacheOptions m_options;
  WarnFn m_warn;
  std::atomic<bool> m_down{false}, m_refused{false};
  std::atomic<int> m_hits{0}, m_misses{0}, m_rejected{0}, m_puts{0};
};

}  // namespace

std::string wrap_action_entry(const std::string& key, std::string_view record) {
  std::string out(kAcMagic);
  out += key + " " + sha256_hex(record) + "\n";
  out += record;
  return out;
}

std::optional<std::string> unwrap_action_entry(const std::string& key, std::string_view entry) {
  const std::string head = std::string(kAcMagic) + key + " ";
  if (entry.substr(0, head.size()) != head) return std::nullopt;
  entry.remove_prefix(head.size());
  if (entry.size() < 65 || entry[64] != '\n') return std::nullopt;
  const std::string_view sum = entry.substr(0, 64);
  std::string_view record = entry.substr(65);
  if (sha256_hex(record) != sum) return std::nullopt;
  return std::string(record);
}

std::unique_ptr<HttpCachedStore> make_http_cached_store(std::unique_ptr<Store> local,
                                                        HttpCacheOptions options, WarnFn warn) {
  return std::make_unique<HttpCache>(std::move(local), std::move(options), std::move(warn));
}

}  // namespace forge::store
