// HttpTransport over libcurl: one easy handle per request (requests are few and
// long; connection reuse would not pay for the shared state), no signals (safe
// from threads), the Retry-After header captured, nothing logged.
#include <curl/curl.h>

#include <cstdlib>
#include <mutex>

#include "rules/llm/client.h"

namespace forge::llm {
namespace {

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// "Retry-After: 3" (seconds; the HTTP-date form is ignored: a default backoff applies).
size_t on_header(char* data, size_t size, size_t n, void* user) {
  std::string line(data, size * n);
  const std::string name = "retry-after:";
  if (line.size() > name.size()) {
    std::string head = line.substr(0, name.size());
    for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head == name) {
      char* end = nullptr;
      const std::string value = line.substr(name.size());
      double s = std::strtod(value.c_str(), &end);
      if (end != value.c_str() && s >= 0) *static_cast<std::optional<double>*>(user) = s;
    }
  }
  return size * n;
}

class CurlTransport : public HttpTransport {
 public:
  CurlTransport() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  HttpResponse post(const HttpRequest& req, double connect_timeout,
                    double total_timeout) override {
    HttpResponse out;
    CURL* h = curl_easy_init();
    if (!h) {
      out.error = "cannot start libcurl";
      return out;
    }
    curl_slist* headers = nullptr;
    for (const auto& line : req.headers) headers = curl_slist_append(headers, line.c_str());
    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout * 1000));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(total_timeout * 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &out.retry_after);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) {
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
    } else {
      out.timed_out = rc == CURLE_OPERATION_TIMEDOUT;
      out.error = curl_easy_strerror(rc);
      out.body.clear();
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return out;
  }
};

}  // namespace

std::unique_ptr<HttpTransport> make_curl_transport() { return std::make_unique<CurlTransport>(); }

}  // namespace forge::llm
