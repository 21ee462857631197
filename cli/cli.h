// The command line: one table of commands (cli/commands.cpp), global options
// parsed once here. Output convention: results on stdout (JSON with --json),
// logs/progress/warnings on stderr. Exit codes: 0 success, 1 a step failed,
// 2 usage or manifest error.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace forge::cli {

struct Invocation {
  std::filesystem::path dir = ".";  // -C DIR: the folder holding forge.yaml
  bool json = false;                // --json
  std::string command;
  std::vector<std::string> args;    // after the command, global options removed
};

struct CommandDef {
  const char* name;
  const char* usage;    // "build [--budget N]"
  const char* summary;  // one line for `forge help`
  int (*run)(const Invocation&);
  const char* details = "";  // `forge COMMAND --help`: its arguments and options, one per line
};

const std::vector<CommandDef>& commands();

// Parses argv into an Invocation; throws UsageError.
Invocation parse_command_line(int argc, char** argv);

// `forge COMMAND --help` (or -h, anywhere before a `--`) and `forge help
// COMMAND` print the command's usage, summary and details on stdout, exit 0.
// Entry point shared by main() and tests: runs and maps errors to exit codes.
int run_cli(int argc, char** argv);

}  // namespace forge::cli
