#pragma once

namespace luminal::cli {

// `luminal compile`: compiles a built-in graph and shows what happened: e-graph sizes, rule
// statistics, the search's progress and candidates, the chosen plan, Graphviz dumps.
int run_compile(int argc, char** argv);

}  // namespace luminal::cli
