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
      ->expected(0, CLI::detail::expected_max_vector_size);  // run_command says what is too many
  run_cmd->add_flag("--list", run.list,
                    "List the demos: chapter, default world and the worlds each accepts");
  run_cmd->add_flag("--lab", run.lab,
                    "Run the demo with your own code (labs/NN-x) instead of the solution");
  add_int(*run_cmd, "--ranks", run.ranks, "World size (default: the demo's)", {1, kMaxRanks})
      ->default_str("");
  run_cmd->add_option("--backend", run.backend,
                      "threads (default), or mpi / nccl where built; mpi starts mpirun itself");
  add_path(*run_cmd, "--hostfile", run.hostfile,
           "With --backend mpi: an OpenMPI hostfile (lines like `node1 slots=2`) to "
           "spread the ranks over several machines");
  add_path(*run_cmd, "--trace", run.trace,
           "Write a Chrome trace (Perfetto, chrome://tracing) to this file");
  add_path(*run_cmd, "--json", run.json,
           "Write every rank's check and error and the full traffic matrix (bytes and "
           "messages) as JSON to this file; the terminal shows a summary beyond 16 ranks");
  return run_cmd;
}

CLI::App* add_train_subcommand(CLI::App& app, TrainCommandOptions& options) {
  train::RunSpec& spec = options.spec;
  CLI::App* train_cmd = app.add_subcommand(
      "train",
      "Train with a strategy (default: single, the reference every parallel chapter must match)\n"
      "on P ranks: progress with loss and tokens/s, the loss curve as CSV and SVG, time per\n"
      "layer type, memory per rank. Defaults are the standard run (dtw::train::standard_run).\n"
      "A chapter's strategy runs the chapter's solution; --lab runs it with your lab.\n"
      "--backend mpi --ranks P [--hostfile FILE] starts mpirun with P processes of this program\n"
      "(one rank each; rank 0 prints), as dtw run --backend mpi does.");
  train_cmd->add_option("--strategy", options.strategy, "Strategy name (--list shows them)")
      ->capture_default_str();
  train_cmd->add_flag("--list", options.list, "List the registered strategies and their knobs");
  train_cmd->add_flag("--lab", options.lab,
                      "Train with your own code (labs/NN-x of the strategy's chapter) instead of "
                      "the solution");
  add_int(*train_cmd, "--ranks", options.ranks, "World size", {1, kMaxRanks});
  train_cmd->add_option("--backend", options.backend,
                        "threads, or mpi: dtw starts mpirun with one process per rank (as "
                        "dtw run --backend mpi does); rank 0 prints")
      ->capture_default_str();
  train_cmd
      ->add_option("--device", options.device,
                   "host, or cuda: every rank's model, gradients, optimizer state and "
                   "messages on a GPU (rank r on device r % GPUs, so ranks may share one); "
                   "with --backend threads")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  add_path(*train_cmd, "--hostfile", options.hostfile,
           "With --backend mpi: an OpenMPI hostfile (lines like `node1 slots=2`) to spread the "
           "ranks over several machines");
  train_cmd->add_option("--set", options.knobs,
                        "Strategy knob key=value (repeatable; --list shows each strategy's knobs, "
                        "any other key is refused)");
  add_int(*train_cmd, "--memory-cap", options.memory_cap,
          "Per-rank memory cap in bytes (0: none); past it, OutOfMemory", {0});
  train_cmd->add_option("--fabric", options.fabric,
                        "Cluster the timeline is replayed on: pcie-8, nvlink-8, ib-2x8, ib-4x8, ideal-8")
      ->capture_default_str();
  train_cmd->add_flag("--compare", options.compare,
                      "Also run the reference and report max |θ − θ_ref| (exit 1 on mismatch)");
  train_cmd
      ->add_option("--model", spec.model, "mlp-tiny, gpt-tiny, gpt-small, gpt-base or gpt2-124m")
      ->capture_default_str();
  // Numbers are parsed by dtw (cli_values.h): no clamping, finite reals, and
  // the ranges of RunSpec::validate said in the options' words ("--batch must
  // be at least 1, got 0"); what depends on the model is train_command's.
  add_int(*train_cmd, "--steps", spec.steps, "Optimizer steps", {1});
  add_int(*train_cmd, "--batch", spec.batch, "Global batch (sequences, or rows for the MLP)", {1});
  add_int(*train_cmd, "--seq-len", spec.seq_len, "Tokens per sequence (0: the context)", {0});
  train_cmd->add_option("--task", options.task,
                        "GPT models only: corpus (built-in text, the default) or synthetic");
  train_cmd->add_option("--optimizer", options.optimizer, "adamw or sgd")->capture_default_str();
  add_real(*train_cmd, "--lr", options.lr,
           "Learning rate (default: the optimizer's: adamw 0.003, sgd 0.1)", {0, true});
  add_real(*train_cmd, "--clip", spec.clip_norm, "Gradient-norm clip, 0 for none", {0});
  add_int(*train_cmd, "--warmup", spec.warmup_steps, "Steps of linear learning-rate warm-up", {0});
  add_uint(*train_cmd, "--seed", spec.seed, "Seed of the initial weights and the data");
  train_cmd->add_option("--dtype", options.dtype, "float32 or float64")->capture_default_str();
  add_path(*train_cmd, "--out", options.out,
           "File stem of the loss curve (STEM.csv, STEM.svg, STEM-timeline.svg), not a folder; "
           "default train-MODEL");
  add_path(*train_cmd, "--json", options.json,
           "Write the losses and every rank's timeline and memory as JSON to this file; the "
           "terminal shows a summary beyond 16 ranks");
  // --list only lists: an option beside it (--list --strategy nope) would be
  // ignored, so it is refused. Checked once parsing is done, not with CLI11's
  // excludes(), which would print "Excludes: --list" under every option of
  // the help.
  train_cmd->parse_complete_callback([train_cmd] {
    const CLI::Option* list = train_cmd->get_option("--list");
    if (list->count() == 0) return;
    for (const CLI::Option* o : train_cmd->get_options())
      if (o != list && o->count() > 0)
        throw CLI::ValidationError(o->get_name() + " and --list cannot be given together");
  });
  return train_cmd;
}

}  // namespace dtw::cli
