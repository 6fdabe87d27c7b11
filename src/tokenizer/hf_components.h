#pragma once
// Builders for the pipeline stages of a Hugging Face tokenizer.json. Each throws luminal::Error
// naming the component type and `origin` (the file) for a type this library does not implement.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace luminal {

// null (no stage) is accepted by each builder.
Normalizer build_normalizer(const nlohmann::json& spec, const std::string& origin);
PreTokenizer build_pre_tokenizer(const nlohmann::json& spec, const std::string& origin);
Decoder build_decoder(const nlohmann::json& spec, const std::string& origin);
// `token_id` resolves token texts that a template names.
PostProcessor build_post_processor(const nlohmann::json& spec, const std::string& origin,
                                   const std::function<std::optional<int32_t>(std::string_view)>& token_id);

}  // namespace luminal
