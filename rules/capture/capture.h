// Capture: run each model's unchanged command with the capture library loaded
// (docs/CAPTURE.md), ingest what it recorded into the store, and turn it into
// ranked targets. One step per model; its key covers the command, the files it
// names, the environment, the toolchain, the device and the capture settings, so
// a second build re-captures only when one of those changed.
#pragma once

#include "engine/build.h"
#include "rules/capture/selection.h"

namespace forge {

class CaptureRule : public Rule {
 public:
  std::string name() const override { return "capture"; }
  void apply(BuildContext& ctx) override;
};

// Turns a capture step's record into this model's ops on `backend` ("cpu" |
// "cuda"), one Target per captured signature, unranked: those that can be no
// target (rules/capture/selection.h) carry their reason in `selection`.
std::vector<Target> targets_from_capture(const std::string& model, const nlohmann::json& record,
                                         std::optional<double> ceiling_bytes_per_s,
                                         const std::string& backend);

// "CUDA" for the cuda backend, "CPU" otherwise: the dispatch key a backend's kernels run at.
std::string dispatch_key_of(const std::string& backend);

// Bytes one call moves: every tensor argument read once, every output written once.
double bytes_moved(const nlohmann::json& args, const nlohmann::json& outputs);

}  // namespace forge
