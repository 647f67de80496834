// dtw bench train: every named strategy on each world of --ranks through the training
// layer's harness, one row each: tokens/s, bytes per rank per step and peak
// memory per rank measured beside the strategy's formulas, the bubble and
// overlap fractions measured and on a modeled fabric, and the largest
// parameter difference from the reference. --json writes the rows with the
// keys docs/architecture.md lists ("dtw bench train"). Every row is checked
// (check_strategy) before the first runs; a row that still fails while
// running ends the run after the table of the rows measured before it.
// With --backend mpi it starts mpirun with one process per rank and the same
// arguments (mpi_launch.h, as `dtw train --backend mpi` does); every process
// runs every row (single's on rank 0), and rank 0 prints and writes.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_values.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/launch.h"
#include "dtw/output_file.h"
#include "dtw/memory.h"
#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/train/fabric.h"
#include "dtw/train/strategy.h"
#include "dtw/train/timeline.h"
#include "exit_codes.h"
#include "manifest.h"
#include "mpi_launch.h"
#include "process.h"
#include "train_rows.h"
#if DTW_BENCH_HAVE_CH00
#include "ranks_and_messages.h"
#endif

namespace {

using nlohmann::json;
using namespace dtw;
using namespace dtw::train;
using dtw::bench::Row;
using dtw::bench::print_table;
using dtw::bench::run_row;
using dtw::bench::timeline_stem;


// This machine's links by chapter 00's ping-pong (2 rank threads), and its
// copy bandwidth for the reductions.
Cluster fit_this_machine() {
  double alpha = 2e-6, beta = 1 / 10e9;
#if DTW_BENCH_HAVE_CH00
  std::vector<ch00::PingPongSample> samples;
  const std::vector<std::int64_t> sizes = {8, 1024, 65536, 1 << 20, 4 << 20};
  launch(2, [&](Comm& comm) {
    auto s = ch00::ping_pong(comm, sizes, 5);
    if (comm.rank() == 0) samples = s;
  });
  const ch00::AlphaBeta ab = ch00::fit_alpha_beta(samples);
  alpha = std::max(ab.alpha_seconds, 0.0);
  beta = std::max(ab.beta_seconds_per_byte, 0.0);
#endif
  std::vector<char> a(32 << 20, 1), b(32 << 20);
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), a.size());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return this_machine(alpha, beta, 2.0 * static_cast<double>(a.size()) / best);
}


}  // namespace

int run_bench(int argc, char** argv) {
  CLI::App app{"dtw bench train: strategies side by side, measured and modeled", "dtw bench train"};
  std::string strategies = "single", backend = "threads", fabric_name = "nvlink-8", json_path,
              svg_stem, dtype = "float32", hostfile, device = "host";
  std::vector<int> worlds{1};  // --ranks: every strategy but single on each
  RunSpec spec = standard_run("gpt-tiny");
  spec.steps = 10;
  std::vector<std::string> knob_args;
  std::vector<std::int64_t> micro_batches;  // empty: not given
  std::optional<std::int64_t> layers;
  app.add_option("--strategy", strategies, "Comma-separated strategy names")->capture_default_str();
  dtw::cli::add_int_list(app, "--ranks", worlds,
                         "Comma-separated world sizes: every strategy but single runs on each "
                         "(one value with --backend mpi)",
                         {1, dtw::cli::kMaxRanks})
      ->default_str("1");
  app.add_option("--backend", backend,
                 "threads (every row in this process) or mpi (this program starts mpirun with "
                 "--ranks processes; every row runs on them, single's on rank 0; rank 0 prints)")
      ->capture_default_str();
  app.add_option("--device", device,
                 "host, or cuda: every rank's model and messages on a GPU (threads ranks, rank r "
                 "on device r % GPUs); the single row too")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  dtw::cli::add_path(app, "--hostfile", hostfile,
                     "With --backend mpi: an OpenMPI hostfile (lines like `node1 slots=2`)");
  app.add_option("--fabric", fabric_name, "pcie-8, nvlink-8, ib-2x8, ib-4x8, ideal-8 or this-machine")
      ->capture_default_str();
  app.add_option("--model", spec.model, "mlp-tiny, gpt-tiny, gpt-small, gpt-base or gpt2-124m")
      ->capture_default_str();
  // Numbers as dtw train parses them (no clamping); ranges are RunSpec::validate's.
  dtw::cli::add_int(app, "--steps", spec.steps, "Steps per strategy", {1});
  dtw::cli::add_int(app, "--batch", spec.batch, "Global batch", {1});
  app.add_option("--dtype", dtype, "float32 or float64")->capture_default_str();
  app.add_option("--set", knob_args,
                 "Strategy knob key=value (repeatable): given to each strategy that has it "
                 "(dtw train --list)");
  dtw::cli::add_int_list(app, "--micro-batches", micro_batches,
                         "Comma-separated m: one row per strategy and m (sets the knob "
                         "micro_batches; not with --set micro_batches=...)",
                         {1, std::numeric_limits<int>::max()})
      ->default_str("");
  dtw::cli::add_int(app, "--layers", layers,
                    "Train the model with this many blocks (GPT) or layers (MLP), widths unchanged",
                    {1, 1 << 16});
  dtw::cli::add_path(app, "--json", json_path, "Write the rows as JSON to this file");
  dtw::cli::add_path(app, "--svg", svg_stem, "Write timeline SVGs STEM-<strategy>-p<P>[-<fabric>].svg");
  app.footer(
      "Every row (strategy, ranks, knobs) is checked against the run before the first row runs:\n"
      "one a strategy cannot run (a batch too small for ranks x micro-batches, more stages than\n"
      "the model has units, a bad knob) is named with its values and nothing runs (exit 2).\n"
      "A row that still fails while running ends the run: the table of the rows measured\n"
      "before it is printed, --json is not written, and the exit is 3 (2 for bad input that\n"
      "only the run could see).");
  // dtw's exit-code convention (dtw --help): 0 ok, 2 bad usage, 3 a run failed.
  std::setvbuf(stdout, nullptr, _IOLBF, 1 << 16);  // rows reach a pipe as they are printed
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "dtw bench train: {} (--help lists the options)\n",
               dtw::cli::parse_error_text(e));
    return dtw::cli::kExitUsage;
  }
  const bool on_mpi = backend == "mpi";
  // The largest world: what mpirun starts (--backend mpi takes one).
  const int ranks = *std::max_element(worlds.begin(), worlds.end());
  // Under the mpirun this program started, every process runs every row
  // (collectively: the harness shares each row's outcome with every process),
  // and only rank 0 prints, writes and reports an error.
  const bool rank_process = on_mpi && dtw::cli::inside_mpirun();
  const bool printing = !rank_process || dtw::cli::is_printing_process();
  std::optional<dtw::cli::StdoutSilencer> quiet;
  if (!printing) quiet.emplace();
  const auto say_error = [&](const std::exception& e) {
    if (printing) fmt::print(stderr, "dtw bench train: {}\n", dtw::cli::usage_text(e));
  };
  try {
    spec.dtype = dtype_from_name(dtype);
    DTW_CHECK_ARG(backend == "threads" || on_mpi,
                  "--backend " << backend << ": dtw bench train runs on threads or mpi");
    DTW_CHECK_ARG(hostfile.empty() || on_mpi, "--hostfile only applies to --backend mpi");
    DTW_CHECK_ARG(!on_mpi || worlds.size() == 1,
                  "--backend mpi runs every row on the processes mpirun starts: give one --ranks, "
                  "got " << worlds.size() << " (run once per world size)");
    DTW_CHECK_ARG(!on_mpi || DTW_HAVE_MPI,
                  "--backend mpi: this build has no mpi backend: install OpenMPI (./dtw setup) and "
                  "rebuild");
    if (fabric_name != "this-machine") find_gpu_cluster(fabric_name);  // an unknown one: now
    // A run of no steps has no step time, no rate and no traffic to show.
    DTW_CHECK_ARG(spec.steps >= 1, "--steps must be at least 1, got " << spec.steps);
    if (layers) {
      // A deeper (or shallower) variant of the named model: pipelines need at
      // least p·v units, and the named models have 3 to 6.
      model::ModelConfig c = model::model_config(spec.model);
      if (c.kind == model::ModelKind::kGpt) c.layers = *layers;
      else c.hidden.assign(static_cast<std::size_t>(*layers - 1), c.hidden.front());
      c.name = spec.model + "-l" + std::to_string(*layers);
      spec.model = c.name;
      spec.custom_config = c;
    }
    spec.validate();
    // Outputs are checked before anything runs.
    if (!json_path.empty()) dtw::check_writable(json_path, "dtw bench train --json");
    std::vector<std::string> sweep;  // micro_batches values, or one empty entry
    for (const std::int64_t m : micro_batches) sweep.push_back(std::to_string(m));
    if (sweep.empty()) sweep.push_back("");
    const Knobs knobs = Knobs::parse(knob_args);
    // Two values for one knob: neither is dropped in silence.
    DTW_CHECK_ARG(micro_batches.empty() || !knobs.has("micro_batches"),
                  "--micro-batches and --set micro_batches=" << knobs.get("micro_batches", "")
                      << " both set the knob micro_batches: give one of them");
    std::vector<std::string> known;
    for (const Strategy& s : dtw::train::strategies()) known.push_back(s.name);
    std::vector<const Strategy*> chosen;
    for (const std::string& name : dtw::cli::parse_name_list("--strategy", strategies, known))
      chosen.push_back(&find_strategy(name));
    // The single-device reference is always the first row: the baseline.
    const auto single = std::find_if(chosen.begin(), chosen.end(),
                                     [](const Strategy* c) { return c->name == "single"; });
    if (single == chosen.end()) chosen.insert(chosen.begin(), &find_strategy("single"));
    else std::rotate(chosen.begin(), single, single + 1);
    // Every row is checked before the first one runs (check_strategy: the
    // strategy's ranks and knobs against the run), so a bad row is refused
    // at once, not after minutes of measuring the rows before it.
    struct Planned {
      const Strategy* strategy;
      int ranks;
      Knobs knobs;
      std::string label;  // " m=4" in a --micro-batches sweep
    };
    // A knob (--set, --micro-batches) goes to the rows whose strategy declares
    // it, so strategies with different knobs compare in one run. One that no
    // chosen strategy declares goes to every row but the baseline's (to
    // single's too when it is the only one), whose checks then refuse it,
    // each naming its strategy's knobs: a key is never dropped silently.
    const bool only_single = std::all_of(chosen.begin(), chosen.end(),
                                         [](const Strategy* c) { return c->name == "single"; });
    const auto declared = [&](const Strategy& s, const std::string& key) {
      const auto is = [&](const Strategy* c) {
        return std::any_of(c->knobs.begin(), c->knobs.end(),
                           [&](const Knob& k) { return k.name == key; });
      };
      return is(&s) || ((s.name != "single" || only_single) &&
                        std::none_of(chosen.begin(), chosen.end(), is));
    };
    std::vector<Planned> plan;
    std::string refused;
    int refused_rows = 0;
    for (const Strategy* s : chosen) {
      for (const int p : s->name == "single" ? std::vector<int>{1} : worlds) {
        const bool swept = sweep.front().empty() || declared(*s, "micro_batches");
        for (const std::string& m : swept ? sweep : std::vector<std::string>{""}) {
          Knobs k;
          for (const std::string& key : knobs.keys())
            if (declared(*s, key)) k.set(key, knobs.get(key, ""));
          if (!m.empty()) k.set("micro_batches", m);
          try {
            check_strategy(*s, spec, p, k);
          } catch (const dtw::InvalidArgument& e) {
            refused += fmt::format("\n  {}", e.what());
            ++refused_rows;
          }
          plan.push_back({s, p, k, m.empty() ? "" : " m=" + m});
        }
      }
    }
    DTW_CHECK_ARG(refused_rows == 0, refused_rows << " of " << plan.size()
                                                  << " rows cannot run, so none was run:"
                                                  << refused);
    // Every file the run writes: writable, and no two of them one file.
    std::vector<dtw::OutputPath> outputs{{json_path, "--json"}};
    if (!svg_stem.empty()) {
      std::error_code ec;
      const std::filesystem::file_status is = std::filesystem::status(svg_stem, ec);
      DTW_CHECK_ARG(!std::filesystem::exists(is) || std::filesystem::is_regular_file(is),
                    "--svg " << svg_stem << ": that is "
                        << (std::filesystem::is_directory(is) ? "a folder" : "a special file")
                        << ", and --svg takes a file stem: it writes "
                           "STEM-<strategy>-p<P>.svg and STEM-<strategy>-p<P>-<fabric>.svg"
                        << (std::filesystem::is_directory(is) ? " (e.g. --svg " + svg_stem + "/run)"
                                                              : std::string()));
      for (const Planned& r : plan) {
        const std::string base = timeline_stem(svg_stem, r.strategy->name, r.ranks, r.label);
        outputs.push_back({base + ".svg", "--svg (" + r.strategy->name + r.label +
                                              ", measured)"});
        outputs.push_back({base + "-" + fabric_name + ".svg",
                           "--svg (" + r.strategy->name + r.label + ", modeled)"});
        dtw::check_writable(outputs[outputs.size() - 2].path, outputs[outputs.size() - 2].what);
        dtw::check_writable(outputs.back().path, outputs.back().what);
      }
    }
    dtw::check_distinct_outputs(outputs);
    if (on_mpi) {
      LaunchOptions probe;  // a bad DTW_MPI_WATCHDOG_SECONDS: refused before mpirun starts
      probe.backend = backend;
      check_launch_options(ranks, probe);
    }
    if (on_mpi && !rank_process) {
      // Every row is checked: mpirun runs this program again with the same
      // arguments, --ranks processes (single's row runs on the first).
      if (!hostfile.empty()) dtw::cli::check_hostfile(hostfile);
      return dtw::cli::run_mpirun(
          {dtw::cli::without_hostfile(std::vector<std::string>(argv + 1, argv + argc)), ranks,
           hostfile});
    }
    if (rank_process && ranks > dtw::cli::mpi_job_size())
      throw dtw::cli::UsageError(fmt::format(
          "--ranks {} but mpirun started {} process(es): use mpirun -np {}, or let dtw bench "
          "train start mpirun",
          ranks, dtw::cli::mpi_job_size(), ranks));
    const Cluster fabric =
        fabric_name == "this-machine" ? fit_this_machine() : find_gpu_cluster(fabric_name);
    fmt::print(
        "dtw bench train: {} ({} tokens per step){}; fabric {} ({})\n", spec.hyperparameters(),
        spec.tokens_per_step(),
        device == "cuda" ? "; every rank on a CUDA device (threads ranks sharing the GPUs)" : "",
        fabric.name, fabric.sources);
    if (fabric.measured_compute)
      fmt::print("  this-machine links: alpha {:.2f} us, 1/beta {:.2f} GB/s\n", fabric.intra.alpha * 1e6,
                 1e-9 / fabric.intra.beta);
    std::vector<Row> rows;
    std::exception_ptr failure;  // a row that failed while running: the rows before it still print
    for (const Planned& r : plan) {
      try {
        rows.push_back(run_row(*r.strategy, spec, r.ranks, backend, device == "host" ? "" : device,
                               r.knobs, fabric, printing ? svg_stem : std::string(), r.label));
      } catch (const std::exception&) {
        failure = std::current_exception();
        fmt::print("  {}{} on {} rank(s): failed (the error is below); {} row(s) not run\n",
                   r.strategy->name, r.label, r.ranks, plan.size() - rows.size() - 1);
        break;
      }
      const std::string in_force = knobs_in_force(*r.strategy, spec, r.ranks, r.knobs);
      fmt::print("  {}{} on {} rank(s): done{}\n", r.strategy->name, r.label, r.ranks,
                 in_force.empty() ? "" : " (knobs " + in_force + ")");
    }
    if (!rows.empty()) {
      print_table(rows);
      fmt::print("tokens/s: median step after the first; x: ratio to single in this run. "
                 "bytes/step: busiest rank's sends. bubble: measured / on {} / formula. max|dθ|: "
                 "vs the reference (-: not compared).\n",
                 fabric.name);
    }
    if (failure) {
      if (!json_path.empty()) fmt::print("{} not written: a row failed\n", json_path);
      std::rethrow_exception(failure);
    }
    if (!json_path.empty() && printing) {
      json out = json::array();
      for (const Row& r : rows) out.push_back(r.j);
      dtw::write_file(json_path, out.dump(2) + "\n", "dtw bench train --json");
      fmt::print("wrote {}\n", json_path);
    }
  } catch (const CLI::ParseError& e) {  // cli_values.h's parse_* (--strategy)
    say_error(e);
    return dtw::cli::kExitUsage;
  } catch (const dtw::cli::UsageError& e) {
    say_error(e);
    return dtw::cli::kExitUsage;
  } catch (const dtw::InvalidArgument& e) {
    say_error(e);
    return dtw::cli::kExitUsage;
  } catch (const std::exception& e) {
    say_error(e);
    return dtw::cli::kExitRunFailed;
  }
  return dtw::cli::kExitOk;
}

int main(int argc, char** argv) {
  // A rank of `--backend mpi` marks its status as dtw's (mpi_launch.h).
  return dtw::cli::rank_process_status(run_bench(argc, argv));
}
