#pragma once
namespace luminal::cli {
int run_tokenize(int argc, char** argv);  // luminal tokenize
int run_logits(int argc, char** argv);    // luminal logits
int run_bench(int argc, char** argv);     // luminal bench
}  // namespace luminal::cli
