#include "run_cli.h"

#include "cli_values.h"
#include "exit_codes.h"

namespace dtw::cli {

Context load_context() {
  Context context;
  context.build = locate_build();
  context.chapters = load_chapters(context.build);
  return context;
}

CLI::App* add_run_subcommand(CLI::App& app, RunOptions& run) {
  CLI::App* run_cmd = app.add_subcommand(
      "run", "Run a chapter demo with the solution, or with your lab (--lab); dtw run --list "
             "names them");
  run_cmd->add_option("demo", run.words,
                      "Demo name, e.g. ping-pong; or `pitfall NAME` for a broken variant from "
                      "the field that the workbench must catch (`pitfall` alone lists them)")
      ->expected(0, 2);
  run_cmd->add_flag("--list", run.list, "List the demos");
  run_cmd->add_flag("--lab", run.lab,
                    "Run the demo with your own code (labs/NN-x) instead of the solution");
  add_int(*run_cmd, "--ranks", run.ranks, "World size (default: the demo's)", {1, kMaxRanks})
      ->default_str("");
  run_cmd->add_option("--backend", run.backend,
                      "threads (default), or mpi / nccl where built; mpi starts mpirun itself");
  run_cmd->add_option("--hostfile", run.hostfile,
                      "With --backend mpi: an OpenMPI hostfile (lines like `node1 slots=2`) to "
                      "spread the ranks over several machines");
  run_cmd->add_option("--trace", run.trace,
                      "Write a Chrome trace (Perfetto, chrome://tracing) to this file");
  run_cmd->add_option("--json", run.json,
                      "Write every rank's check and error and the full traffic matrix (bytes and "
                      "messages) as JSON to this file; the terminal shows a summary beyond 16 ranks");
  return run_cmd;
}

}  // namespace dtw::cli
