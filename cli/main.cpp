#include "cli/cli.h"

int main(int argc, char** argv) { return forge::cli::run_cli(argc, argv); }
