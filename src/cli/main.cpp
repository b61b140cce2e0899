// deepinfer: one binary, one subcommand per file (see command.h).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "kernels/isa.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

namespace {

void print_usage() {
  auto commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::printf("deepinfer %s: LLM / MoE inference and serving engine\n\n", DEEPINFER_VERSION);
  std::printf("usage: deepinfer <command> [flags]   (deepinfer <command> --help for flags)\n\n");
  std::printf("commands:\n");
  for (const auto& command : commands) {
    std::printf("  %-14s %s\n", command.name.c_str(), command.summary.c_str());
  }
}

// The commands whose ranks > 0 follow rank 0 in lockstep (docs/DISTRIBUTED.md); the others
// would run as independent copies under mpirun.
bool runs_distributed(const std::string& command) {
  return command == "generate" || command == "bench" || command == "serve" || command == "run" ||
         command == "validate" || command == "info";
}

}  // namespace
}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  using namespace deepinfer::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::printf("deepinfer %s\n", DEEPINFER_VERSION);
    return 0;
  }
  for (const auto& command : command_registry()) {
    if (command.name != args[0]) continue;
    try {
      // A bad DEEPINFER_ISA is reported now rather than at the first kernel call.
      deepinfer::kernels::active_isa();
      const int ranks = deepinfer::parallel::launcher_world_size();
      DI_CHECK(ranks == 1 || runs_distributed(command.name), "mpirun started ", ranks,
               " ranks, but `deepinfer ", command.name,
               "` runs in one process only; generate, bench, serve, run, validate and info "
               "run under mpirun (docs/DISTRIBUTED.md)");
      const int status = command.run(std::vector<std::string>(args.begin() + 1, args.end()));
      deepinfer::parallel::mpi_finalize();  // only if a distributed command started MPI
      return status;
    } catch (const deepinfer::Error& e) {
      std::fprintf(stderr, "deepinfer %s: error: %s\n", command.name.c_str(), e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "deepinfer %s: internal error: %s\n", command.name.c_str(), e.what());
    }
    // Under mpirun the other ranks may be waiting in a collective for this one: end them all.
    std::fflush(stderr);
    deepinfer::parallel::mpi_abort_job(1);
    return 1;
  }
  std::fprintf(stderr, "deepinfer: unknown command '%s' (see deepinfer --help)\n", args[0].c_str());
  return 2;
}
