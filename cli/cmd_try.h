// `forge try TARGET FILE [--json] [--timeout SECONDS]`: evaluate one candidate
// kernel the user brings against a captured target (rules/evaluate/evaluate.h) and print
// the verdict, the reason, compile errors verbatim and timings beside the
// baselines. Exit 0 when accepted, 1 when rejected (or not evaluable).
#pragma once

#include "cli/cli.h"

namespace forge::cli {

int cmd_try(const Invocation& inv);

}  // namespace forge::cli
