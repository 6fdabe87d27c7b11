#pragma once
namespace luminal::cli {
int run_generate(int argc, char** argv);  // luminal generate
int run_chat(int argc, char** argv);      // luminal chat
}  // namespace luminal::cli
