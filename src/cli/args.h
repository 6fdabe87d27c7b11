#pragma once
// A small option parser shared by the commands: "--name value" options and "--flag" switches,
// each declared with its help line, so every command gets --help and clear errors for free.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace luminal::cli {

class Args {
 public:
  Args(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}
  Args& option(const std::string& name, const std::string& value_name, const std::string& help, std::string dflt = "");
  Args& flag(const std::string& name, const std::string& help);

  // False when --help was given (the help is printed); Error on an unknown or incomplete option.
  bool parse(int argc, char** argv);

  bool has(const std::string& name) const;  // given on the command line
  bool on(const std::string& name) const { return has(name); }
  std::string str(const std::string& name) const;  // the value, or the default
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  std::string help() const;

 private:
  struct Spec {
    std::string value_name, help, dflt;
    bool is_flag = false;
  };
  std::string usage_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> given_;
};

}  // namespace luminal::cli
