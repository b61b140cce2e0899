#pragma once
// Subcommands register themselves: each src/cli/cmd_*.cpp defines one function and a
// static Registration, so adding a command never touches main.cpp.
#include <string>
#include <vector>

namespace deepinfer::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

std::vector<Command>& command_registry();

struct Registration {
  Registration(std::string name, std::string summary, CommandFn run) {
    command_registry().push_back({std::move(name), std::move(summary), run});
  }
};

}  // namespace deepinfer::cli
