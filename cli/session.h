// What every command that works on a manifest needs: the manifest, its store
// (locked for commands that write), a command runner and the probed environment.
#pragma once

#include <memory>
#include <optional>

#include "cli/cli.h"
#include "engine/build.h"
#include "store/lock.h"
#include "store/store.h"

namespace forge::cli {

struct Session {
  Manifest manifest;
  std::unique_ptr<store::Store> store;
  std::optional<store::StoreLock> lock;
  std::unique_ptr<CommandRunner> runner;
  std::unique_ptr<Progress> progress;
  std::unique_ptr<Builder> builder;
  std::unique_ptr<BuildContext> ctx;
};

enum class Access { Read, Write };

// Loads DIR/forge.yaml, opens (and for Write, locks) the store, probes the toolchain
// and device. Throws ManifestError / Error.
std::unique_ptr<Session> open_session(const Invocation& inv, Access access,
                                      BuildOptions options = {});

}  // namespace forge::cli
