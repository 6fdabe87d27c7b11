#include <cstdio>
#include <iostream>

#include "cli/model_cmds.h"
#include "cli/model_session.h"
#include "core/error.h"

namespace luminal::cli {

int run_logits(int argc, char** argv) {
  Args a("luminal logits --model PATH --ids \"1 2 3\"",
         "Prints {\"logits\": [[...], ...]}: one row of vocabulary logits per position, from a single prefill.");
  add_model_options(a);
  a.option("--ids", "\"1 2 3\"", "the token ids");
  if (!a.parse(argc, argv)) return 0;
  if (!a.has("--ids")) throw Error("--ids \"1 2 3\" is required");
  std::vector<int32_t> ids = parse_ids(a.str("--ids"));
  LanguageModel m = load_model(a, true);
  std::vector<float> logits = m.step(ids);
  size_t vocab = static_cast<size_t>(m.config().vocab);
  std::string out = "{\"logits\": [";
  char buf[32];
  for (size_t p = 0; p < ids.size(); ++p) {
    out += p ? ", [" : "[";
    for (size_t v = 0; v < vocab; ++v) {
      std::snprintf(buf, sizeof buf, v ? ", %.9g" : "%.9g", static_cast<double>(logits[p * vocab + v]));
      out += buf;
    }
    out += "]";
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace luminal::cli
