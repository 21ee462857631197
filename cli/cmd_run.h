// forge run [--json-report FILE] -- COMMAND...: the user's unchanged program
// with the manifest's libforge.so loaded (docs/PACKAGE.md).
#pragma once

#include "cli/cli.h"

namespace forge::cli {

int cmd_run(const Invocation& inv);

}  // namespace forge::cli
