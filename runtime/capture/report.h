// The capture's report: FORGE_CAPTURE_DIR/<pid>.json (docs/CAPTURE.md, the
// JSON schema), written on flush() and at exit, and the ops through which the
// Python side asks for it (forge_capture::flush/enabled/note). Torch-free.
#pragma once

#include <cstddef>
#include <string>

namespace forge::capture {

// Writes n bytes to path (created or truncated): the JSON and the samples' files.
bool write_file(const std::string& path, const void* data, size_t n);

// Writes the JSON now; its path, or "" when capture is off or writing failed.
std::string flush();

// The std::atexit handler: flushes unless nothing changed since the last flush.
void atexit_flush();

}  // namespace forge::capture
