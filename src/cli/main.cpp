// The `luminal` command line.
#include <cstring>
#include <iostream>
#include <string>

#include "cli/compile_cmd.h"
#include "cli/example.h"
#include "core/error.h"

static void usage(std::ostream& out) {
  out << "luminal: a search-based inference compiler\n\n"
         "usage: luminal <command> [options]\n\n"
         "commands:\n"
         "  example [--search N] [--dump] [--dot FILE]\n"
         "                                  build a small graph, compile it, run it on the reference\n"
         "                                  runtime and print the result\n"
         "  compile [options]               compile a built-in Llama-shaped graph and show the\n"
         "                                  e-graph, rule statistics, search and plan (--help)\n"
         "  help                            this text\n";
}

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "help";
  try {
    if (cmd == "example") return luminal::cli::run_example(argc - 2, argv + 2);
    if (cmd == "compile" || cmd == "inspect") return luminal::cli::run_compile(argc - 2, argv + 2);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      usage(std::cout);
      return 0;
    }
    std::cerr << "luminal: unknown command '" << cmd << "'\n\n";
    usage(std::cerr);
    return 2;
  } catch (const luminal::Error& e) {
    std::cerr << "luminal: error: " << e.what() << "\n";
    return 1;
  }
}
