#include "cli/args.h"

#include <iostream>

#include "core/error.h"

namespace luminal::cli {

Args& Args::option(const std::string& name, const std::string& value_name, const std::string& help, std::string dflt) {
  order_.push_back(name);
  specs_[name] = {value_name, help, std::move(dflt), false};
  return *this;
}

Args& Args::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = {"", help, "", true};
  return *this;
}

bool Args::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << help();
      return false;
    }
    std::string value;
    bool inline_value = false;
    if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      inline_value = true;
    }
    auto it = specs_.find(a);
    if (it == specs_.end()) throw Error("unknown option '" + a + "' (see " + usage_.substr(0, usage_.find(" [")) + " --help)");
    if (it->second.is_flag) {
      given_[a] = "1";
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) throw Error("option " + a + " needs a value: " + a + " " + it->second.value_name);
      value = argv[++i];
    }
    given_[a] = value;
  }
  return true;
}

bool Args::has(const std::string& name) const { return given_.count(name) > 0; }

std::string Args::str(const std::string& name) const {
  auto it = given_.find(name);
  if (it != given_.end()) return it->second;
  return specs_.at(name).dflt;
}

int64_t Args::integer(const std::string& name) const {
  std::string v = str(name);
  try {
    size_t used = 0;
    int64_t r = std::stoll(v, &used);
    if (used == v.size()) return r;
  } catch (const std::exception&) {
  }
  throw Error("option " + name + " expects an integer, got '" + v + "'");
}

double Args::number(const std::string& name) const {
  std::string v = str(name);
  try {
    size_t used = 0;
    double r = std::stod(v, &used);
    if (used == v.size()) return r;
  } catch (const std::exception&) {
  }
  throw Error("option " + name + " expects a number, got '" + v + "'");
}

std::string Args::help() const {
  std::string h = "usage: " + usage_ + "\n  " + summary_ + "\n\n";
  for (const std::string& n : order_) {
    const Spec& s = specs_.at(n);
    std::string left = "  " + n + (s.is_flag ? "" : " " + s.value_name);
    if (left.size() < 26) left.resize(26, ' ');
    else left += "\n" + std::string(26, ' ');
    h += left + s.help + (s.dflt.empty() ? "" : " (default " + s.dflt + ")") + "\n";
  }
  return h;
}

}  // namespace luminal::cli
