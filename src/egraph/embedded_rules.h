#pragma once
// The rule files of rules/ compiled into the library, as (file name, text) pairs, so an
// installed binary needs no data files.
#include <string>
#include <utility>
#include <vector>

namespace luminal {

const std::vector<std::pair<std::string, std::string>>& embedded_rule_files();

}  // namespace luminal
