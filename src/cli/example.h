#pragma once

namespace luminal::cli {

// The built-in example job: a two-layer MLP with softmax over a dynamic batch.
int run_example(int argc, char** argv);

}  // namespace luminal::cli
