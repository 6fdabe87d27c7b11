#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/model_cmds.h"
#include "cli/model_session.h"
#include "core/error.h"

namespace luminal::cli {

int run_tokenize(int argc, char** argv) {
  Args a("luminal tokenize --tokenizer PATH (--text TEXT | --decode \"ids\") [--special]",
         "Encodes text to token ids or decodes ids to text, as JSON.");
  a.option("--tokenizer", "PATH", "a tokenizer.json, a model folder holding one, or a .gguf file")
      .option("--text", "TEXT", "text to encode")
      .option("--decode", "\"1 2 3\"", "token ids to decode")
      .flag("--special", "encode: apply the post-processor (e.g. add BOS); decode: keep special tokens");
  if (!a.parse(argc, argv)) return 0;
  if (!a.has("--tokenizer")) throw Error("--tokenizer PATH is required");
  if (a.has("--text") == a.has("--decode")) throw Error("give exactly one of --text TEXT or --decode \"1 2 3\"");
  std::optional<Tokenizer> tok = open_tokenizer(a.str("--tokenizer"));
  if (!tok) throw Error("'" + a.str("--tokenizer") + "' holds no tokenizer.json");
  nlohmann::json j;
  if (a.has("--text")) {
    std::vector<int32_t> ids = tok->encode(a.str("--text"), a.has("--special"));
    j["ids"] = ids;
    std::vector<std::string> tokens;
    for (int32_t id : ids) tokens.push_back(tok->id_to_token(id));
    j["tokens"] = tokens;
  } else {
    j["text"] = tok->decode(parse_ids(a.str("--decode")), !a.has("--special"));
  }
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace luminal::cli
