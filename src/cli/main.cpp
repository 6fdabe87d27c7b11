// The `luminal` command line.
#include <cstring>
#include <iostream>
#include <string>

#include "cli/compile_cmd.h"
#include "cli/example.h"
#include "cli/generate_cmd.h"
#include "cli/model_cmds.h"
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
         "  generate --model PATH --prompt TEXT [--chat] [--max-new-tokens N] [--temperature T ...]\n"
         "                                  generate text from a Hugging Face folder or a .gguf file\n"
         "  chat --model PATH                interactive multi-turn chat\n"
         "  tokenize --tokenizer PATH (--text TEXT | --decode IDS)\n"
         "                                  encode or decode with a tokenizer, as JSON\n"
         "  logits --model PATH --ids IDS    logits for every position of one prefill, as JSON\n"
         "  bench --model PATH [--prompt-tokens N] [--new-tokens N] [--iters N]\n"
         "                                  compile time, TTFT, TPOT and peak memory, as JSON\n"
         "  help                            this text\n\n"
         "every command takes --help\n";
}

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "help";
  try {
    if (cmd == "example") return luminal::cli::run_example(argc - 2, argv + 2);
    if (cmd == "generate") return luminal::cli::run_generate(argc - 2, argv + 2);
    if (cmd == "chat") return luminal::cli::run_chat(argc - 2, argv + 2);
    if (cmd == "tokenize") return luminal::cli::run_tokenize(argc - 2, argv + 2);
    if (cmd == "logits") return luminal::cli::run_logits(argc - 2, argv + 2);
    if (cmd == "bench") return luminal::cli::run_bench(argc - 2, argv + 2);
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
