// Where an evaluation's time goes (judge.h, Phases).
#include <cstdlib>
#include <cstring>

#include "judge.h"

namespace forge::worker {

Phases::Phases(Device& dev, void* stream) : m_dev(dev), m_stream(stream) {
  const char* v = std::getenv("FORGE_WORKER_PHASE_SYNC");
  m_sync = v && std::strcmp(v, "1") == 0;
}

void Phases::enter(const char* name) {
  if (m_name && m_sync) m_dev.synchronize(m_stream);
  const auto now = std::chrono::steady_clock::now();
  if (m_name) m_seconds[m_name] += std::chrono::duration<double>(now - m_t0).count();
  m_name = name;
  m_t0 = now;
}

json Phases::record() const {
  json r = json::object();
  for (const auto& [k, v] : m_seconds) r[k] = v;
  return r;
}

}  // namespace forge::worker
