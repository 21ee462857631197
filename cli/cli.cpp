#include "cli/cli.h"

#include <cstdio>
#include <iostream>

#include "util/error.h"
#include "util/strings.h"

namespace forge::cli {

namespace {

void print_help() {
  std::printf("usage: forge [-C DIR] [--json] COMMAND [ARGS]   (forge COMMAND --help: its options)\n\ncommands:\n");
  for (const auto& c : commands()) std::printf("  %-28s %s\n", c.usage, c.summary);
  std::printf(
      "\noptions:\n"
      "  -C DIR    run as if started in DIR (the folder holding forge.yaml)\n"
      "  --json    machine-readable output on stdout; logs and progress on stderr\n"
      "\nexit codes: 0 success, 1 a step failed, 2 usage or manifest error\n");
}

const CommandDef* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

void print_command_help(const CommandDef& c) {
  std::printf("usage: forge [-C DIR] [--json] %s\n\n%s\n", c.usage, c.summary);
  if (c.details && *c.details) std::printf("\n%s", c.details);
}

// -h or --help among the command's own arguments (those after "--" belong to
// the program `forge run` starts).
bool asks_help(const Invocation& inv) {
  for (const auto& a : inv.args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

const CommandDef& command_or_throw(const std::string& name) {
  if (const CommandDef* cmd = find_command(name)) return *cmd;
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  std::string near = closest_match(name, names);
  throw UsageError("unknown command '" + name + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                   "; `forge help` lists them");
}

}  // namespace

Invocation parse_command_line(int argc, char** argv) {
  Invocation inv;
  bool passthrough = false;  // after "--" everything belongs to the command
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (passthrough) {
      inv.args.push_back(a);
    } else if (a == "--") {
      passthrough = true;
      inv.args.push_back(a);
    } else if (a == "-C") {
      if (i + 1 >= argc) throw UsageError("-C needs a directory");
      inv.dir = argv[++i];
    } else if (a.rfind("-C", 0) == 0 && a.size() > 2) {
      inv.dir = a.substr(2);
    } else if (a == "--json") {
      inv.json = true;
    } else if (inv.command.empty() && (a == "-h" || a == "--help")) {
      inv.command = "help";
    } else if (inv.command.empty() && (a == "--version")) {
      inv.command = "version";
    } else if (inv.command.empty()) {
      if (!a.empty() && a[0] == '-') throw UsageError("unknown option '" + a + "'");
      inv.command = a;
    } else {
      inv.args.push_back(a);
    }
  }
  if (inv.command.empty()) inv.command = "help";
  return inv;
}

int run_cli(int argc, char** argv) {
  try {
    Invocation inv = parse_command_line(argc, argv);
    if (inv.command == "help") {
      if (inv.args.size() > 1) throw UsageError("usage: forge help [COMMAND]");
      if (inv.args.empty())
        print_help();
      else
        print_command_help(command_or_throw(inv.args[0]));
      return 0;
    }
    const CommandDef& cmd = command_or_throw(inv.command);
    if (asks_help(inv)) {
      print_command_help(cmd);
      return 0;
    }
    return cmd.run(inv);
  } catch (const ManifestError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "forge: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "forge: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace forge::cli
