// dtw plan: chapter 08's planner on the command line. Every layout of the
// world that can run the model (pp × dp × tp, m micro-batches, with and
// without ZeRO-1) is predicted by the chapter's formulas on a modeled cluster
// (ch08::plan) and printed best first. Nothing is trained: the table helps
// choose what to run with `dtw train --strategy hybrid`, it does not measure.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cli_values.h"
#include "commands.h"
#include "dtw/errors.h"
#include "dtw/memory.h"
#include "dtw/model/config.h"
#include "dtw/output_file.h"
#include "dtw/train/fabric.h"
#include "exit_codes.h"
#include "hybrid_parallelism.h"  // chapter 08's contract: plan, Prediction, Layout
#include "lab_run.h"
#include "style.h"
#include "train_output.h"  // human_rate

namespace dtw::cli {
namespace {

std::vector<std::string> fabric_names() {
  std::vector<std::string> names;
  for (const train::Cluster& c : train::gpu_clusters()) names.push_back(c.name);
  return names;
}

// The run to plan, refused in the options' words (as dtw train refuses it)
// before any prediction: what depends on the model is checked here, the
// ranges by the parser.
train::RunSpec planned_run(const PlanOptions& options) {
  train::RunSpec spec = options.spec;
  const model::ModelConfig config = spec.config();
  if (spec.seq_len > config.context)
    throw UsageError(
        fmt::format("--seq-len must be between 0 and {} (the context of {}; 0: all "
                    "of it), got {}",
                    config.context, config.name, spec.seq_len));
  spec.dtype = train::dtype_from_name(options.dtype);
  spec.validate();
  return spec;
}

// human_seconds rounds below a millisecond to whole microseconds, which on
// the small models turns most parts of a step into "0 us"; a tenth of one
// keeps them apart.
std::string step_time(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.1f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}

std::string yes_no(bool b) {
  return b ? "yes" : "no";
}

double tokens_per_second(const train::RunSpec& spec, const ch08::Prediction& p) {
  return p.step_s > 0 ? static_cast<double>(spec.tokens_per_step()) / p.step_s : 0;
}

std::string cap_text(std::int64_t cap) {
  return cap > 0 ? "memory cap " + human_bytes(static_cast<double>(cap)) + " per rank"
                 : "no memory cap";
}

void print_table(const train::RunSpec& spec, const std::vector<ch08::Prediction>& rows) {
  fmt::print("{}\n",
             paint(Paint::kBold, fmt::format("{:>3}  {:>3} {:>3} {:>3} {:>3} {:>6}  {:>9} {:>9} "
                                             "{:>9} {:>9} {:>9} {:>9} {:>9}  {:>8}  {:>10}  {}",
                                             "#", "pp", "dp", "tp", "m", "ZeRO-1", "step",
                                             "compute", "bubble", "tp comm", "pp comm", "dp comm",
                                             "optimizer", "tok/s", "peak/rank", "note")));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ch08::Prediction& p = rows[i];
    const ch08::Layout& l = p.layout;
    fmt::print(
        "{:>3}  {:>3} {:>3} {:>3} {:>3} {:>6}  {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  "
        "{:>8}  {:>10}  {}\n",
        i + 1, l.pp, l.dp, l.tp, l.micro_batches, yes_no(l.zero1), step_time(p.step_s),
        step_time(p.compute_s), step_time(p.bubble_s), step_time(p.tp_s), step_time(p.pp_s),
        step_time(p.dp_s), step_time(p.optimizer_s), human_rate(tokens_per_second(spec, p)),
        human_bytes(p.memory_total), p.note);
  }
}

void write_json(const std::string& path, const PlanOptions& options, const train::RunSpec& spec,
                std::size_t valid, const std::vector<ch08::Prediction>& rows) {
  nlohmann::json out = {{"model", spec.model},
                        {"ranks", options.ranks},
                        {"fabric", options.fabric},
                        {"batch", spec.batch},
                        {"sequence", spec.sequence()},
                        {"dtype", options.dtype},
                        {"memory_cap", options.memory_cap},
                        {"valid_layouts", valid},
                        {"dropped_by_cap", valid - rows.size()},
                        {"rows", nlohmann::json::array()}};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ch08::Prediction& p = rows[i];
    nlohmann::json memory;
    for (std::size_t c = 0; c < kMemoryCategories; ++c)
      memory[std::string(name_of(static_cast<MemoryCategory>(c)))] = p.memory[c];
    out["rows"].push_back({{"rank", i + 1},
                           {"pp", p.layout.pp},
                           {"dp", p.layout.dp},
                           {"tp", p.layout.tp},
                           {"micro_batches", p.layout.micro_batches},
                           {"zero1", p.layout.zero1},
                           {"layout", p.layout.describe()},
                           {"step_s", p.step_s},
                           {"compute_s", p.compute_s},
                           {"bubble_s", p.bubble_s},
                           {"tp_s", p.tp_s},
                           {"pp_s", p.pp_s},
                           {"dp_s", p.dp_s},
                           {"optimizer_s", p.optimizer_s},
                           {"tokens_per_s", tokens_per_second(spec, p)},
                           {"peak_memory_bytes", p.memory_total},
                           {"peak_memory", memory},
                           {"note", p.note}});
  }
  write_file(path, out.dump(2) + "\n", "dtw plan --json");
}

}  // namespace

CLI::App* add_plan_subcommand(CLI::App& app, PlanOptions& options) {
  train::RunSpec& spec = options.spec;
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Rank the layouts of chapter 08's hybrid parallelism (pp stages × dp replicas × tp slices,\n"
      "m micro-batches, ZeRO-1 or not) of a model on P ranks of a modeled cluster by predicted\n"
      "step time, best first, with the parts of the step, tokens/s and the busiest rank's peak\n"
      "memory. The numbers are chapter 08's formulas (ch08::predict), not measurements: nothing\n"
      "is trained. Exit status 1 when no layout fits --memory-cap.");
  add_name(*cmd, "--model", spec.model, "The model to plan for (gpt-base: GPT-2 small's shape)",
           model::model_names())
      ->required()
      ->default_str("");
  add_int(*cmd, "--ranks", options.ranks, "World size, pp · dp · tp", {1, kMaxRanks})
      ->required()
      ->default_str("");
  add_name(*cmd, "--fabric", options.fabric,
           "The modeled cluster: its devices' FLOP/s and memory bandwidth, and its links inside "
           "and between nodes",
           fabric_names())
      ->required()
      ->default_str("");
  add_bytes(*cmd, "--memory-cap", options.memory_cap,
            "Bytes per rank (e.g. 64M, 2G; 0: none): a layout whose busiest rank needs more is "
            "dropped");
  add_int(*cmd, "--batch", spec.batch, "Global batch in sequences", {1});
  add_int(*cmd, "--seq-len", spec.seq_len, "Tokens per sequence (0: the context)", {0});
  add_int_list(*cmd, "--micro-batches", options.micro_batches,
               "Micro-batches per replica to try, e.g. 2,4,8 (default: 2·pp for each pp, at "
               "most the replica's rows)",
               {1})
      ->default_str("");
  add_name(*cmd, "--dtype", options.dtype, "Element type: its size sets the bytes held and moved",
           {"float32", "float64"});
  add_path(*cmd, "--json", options.json, "Also write the rows as JSON to this file");
  cmd->add_flag("--lab", options.lab,
                "Predict with your planner (labs/08-hybrid-parallelism) instead of the solution's");
  return cmd;
}

namespace {

int plan_rows(const PlanOptions& options, const train::RunSpec& spec) {
  const train::Cluster& cluster = train::find_gpu_cluster(options.fabric);
  if (!options.json.empty()) check_writable(options.json, "dtw plan --json");

  // Every layout that can run, predicted once, best first: none is a usage
  // error; the cap keeps those whose busiest rank fits (ch08::plan's rule).
  const std::vector<ch08::Prediction> all =
      ch08::plan(spec, options.ranks, cluster, 0, options.micro_batches);
  const std::size_t valid = all.size();
  if (valid == 0)
    throw UsageError(fmt::format(
        "no layout of {} ranks can run {} with batch {}{}: pp · dp · tp must be {}, tp must "
        "divide the heads and hidden units, pp must not exceed the model's units, and the batch "
        "needs dp · m rows",
        options.ranks, spec.model, spec.batch,
        options.micro_batches.empty()
            ? std::string()
            : fmt::format(" and --micro-batches {}", fmt::join(options.micro_batches, ",")),
        options.ranks));
  fmt::print("{} {} on {} rank{} of {} ({}): batch {} x {} tokens, {}, {}; {}\n",
             paint(Paint::kBold, "planning"), spec.model, options.ranks,
             options.ranks == 1 ? "" : "s", cluster.name, cluster.description, spec.batch,
             spec.sequence(), options.dtype, cap_text(options.memory_cap),
             options.lab_program ? "your planner (labs/08-hybrid-parallelism)"
                                 : "the solution's planner (chapter 08)");
  std::vector<ch08::Prediction> rows;
  for (const ch08::Prediction& p : all)
    if (options.memory_cap == 0 || p.memory_total <= static_cast<double>(options.memory_cap))
      rows.push_back(p);
  if (rows.empty()) {
    // Nothing fits: name the least any layout needs, so the next cap can be chosen.
    const auto least = std::min_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.memory_total < b.memory_total;
    });
    fmt::print(
        "no layout fits the memory cap of {} per rank: the smallest need is {} per rank "
        "({}); {} more\n",
        human_bytes(static_cast<double>(options.memory_cap)), human_bytes(least->memory_total),
        least->layout.describe(),
        valid == 1 ? "the one valid layout needs"
                   : fmt::format("all {} valid layouts need", valid));
    return kExitCheckFailed;
  }
  print_table(spec, rows);
  fmt::print(
      "{} valid layout{}, {} dropped by the memory cap; the planner proposes {} "
      "(row 1: {} a step)\n",
      valid, valid == 1 ? "" : "s", valid - rows.size(), rows.front().layout.describe(),
      step_time(rows.front().step_s));
  if (!options.json.empty()) {
    write_json(options.json, options, spec, valid, rows);
    fmt::print("wrote {} ({} rows)\n", options.json, rows.size());
  }
  return kExitOk;
}

}  // namespace

int plan_command(const PlanOptions& options) {
  const train::RunSpec spec = planned_run(options);
  // --lab: the same arguments to chapter 08's lab-run program, whose ch08::
  // functions are the learner's (checked here first, so bad usage is refused
  // the same way with and without --lab).
  if (options.lab && !options.lab_program) {
    // The words from `plan` on, as typed.
    const auto plan = std::find(options.words.begin(), options.words.end(), "plan");
    exec_lab_run("08", std::vector<std::string>(plan, options.words.end()));
  }
  try {
    return plan_rows(options, spec);
  } catch (const NotImplemented& e) {
    const std::optional<NotWritten> w = not_written(e.what());
    if (!w) throw;
    print_not_written(*w, "08", "dtw plan --lab", "dtw plan without --lab runs the solution's planner");
    return kExitRunFailed;
  }
}

}  // namespace dtw::cli
