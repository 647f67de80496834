#include "run_cli.h"

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
  run_cmd->add_option("--ranks", run.ranks, "World size (default: the demo's)")
      ->check(CLI::Range(1, 4096));
  run_cmd->add_option("--backend", run.backend,
                      "threads (default), or mpi / nccl where built; mpi starts mpirun itself");
  run_cmd->add_option("--hostfile", run.hostfile,
                      "With --backend mpi: an OpenMPI hostfile (lines like `node1 slots=2`) to "
                      "spread the ranks over several machines");
  run_cmd->add_option("--trace", run.trace,
                      "Write a Chrome trace (Perfetto, chrome://tracing) to this file");
  return run_cmd;
}

}  // namespace dtw::cli
