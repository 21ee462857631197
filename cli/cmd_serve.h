// forge serve [--port N] [--bind ADDR]: a live browser view of the store
// (docs/GUI.md). Reads only: no store lock, so it runs beside `forge build`.
#pragma once

#include "cli/cli.h"

namespace forge::cli {

int cmd_serve(const Invocation& inv);

}  // namespace forge::cli
