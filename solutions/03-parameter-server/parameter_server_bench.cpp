// dtw bench parameter-server: what chapter 03's text measures, in one run.
//
//   1. stragglers: ps-sync, ps-ssp and ps-async with 0, 1 and 2 workers slowed
//      by a factor (and with random jitter), on W workers: tokens/s, updates/s
//      and time to a loss target (steps and wall seconds);
//   2. the server's link: bytes per step on the busiest server link against
//      W, for S = 1 and 2 servers, from the traffic matrix, beside the formula
//      and beside the busiest link of chapter 01's ring allreduce
//      (server_link_bench.cpp);
//   3. loss curves of the three strategies with one straggler (CSV, and an
//      SVG through gnuplot when it is installed: plot, server_link_bench.cpp).
//
// Times are wall-clock on this machine, so compare rows of one run only.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "dtw/output_file.h"
#include "dtw/train/strategy.h"
#include "exit_codes.h"
#include "parameter_server.h"
#include "parameter_server_bench.h"

namespace {

using nlohmann::json;
using namespace dtw;

struct Run {
  std::string strategy, slow;  // e.g. "ps-async", "straggler=1:3"
  std::vector<double> losses, seconds;  // per recorded step: its loss, wall time since the start
  double total = 0;
  std::int64_t updates = 0;
};

Run train_once(const std::string& name, const train::RunSpec& spec, int ranks,
               const std::vector<std::string>& knobs) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.compare = false;
  o.knobs = train::Knobs::parse(knobs);
  Run r;
  r.strategy = name;
  double clock = 0;
  o.on_step = [&](const model::StepInfo& s) {
    clock += s.seconds;
    r.losses.push_back(s.loss);
    r.seconds.push_back(clock);
  };
  const train::RunOutcome out = train::run_strategy(train::find_strategy(name), spec, o);
  r.total = out.seconds;
  const int workers = ranks - static_cast<int>(o.knobs.get_int("servers", 1));
  r.updates = name == "ps-async" ? workers * spec.steps : spec.steps;
  return r;
}

// The mean of the last `n` losses (of all of them when there are fewer).
double mean_of_last(const std::vector<double>& losses, std::size_t n) {
  const std::size_t k = std::min(n, losses.size());
  return std::accumulate(losses.end() - static_cast<long>(k), losses.end(), 0.0) /
         static_cast<double>(k);
}

// The first step whose mean loss over a window of 5 steps ending there is at
// most `target` (−1: never).
std::int64_t step_to(const std::vector<double>& losses, double target) {
  for (std::size_t i = 4; i < losses.size(); ++i)
    if (std::accumulate(losses.begin() + static_cast<long>(i) - 4, losses.begin() + static_cast<long>(i) + 1, 0.0) / 5 <= target)
      return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtw bench parameter-server: stragglers, the server's link, loss curves",
               "dtw bench parameter-server"};
  std::string model = "gpt-tiny", json_path, plot_stem;
  int workers = 4, repeats = 3;
  std::int64_t steps = 100, staleness = 2, batch = 32;
  double factor = 3;
  std::optional<double> given_target;
  app.add_option("--model", model, "mlp-tiny, gpt-tiny or gpt-small")->capture_default_str();
  cli::add_int(app, "--workers", workers, "W", {1, 64});
  cli::add_int(app, "--steps", steps, "steps of each run", {1, 1000000});
  cli::add_int(app, "--batch", batch, "global batch (rows; big enough that compute dominates)",
               {1, 1 << 20});
  cli::add_real(app, "--factor", factor, "the stragglers' slowdown", {.min = 1});
  cli::add_int(app, "--staleness", staleness, "ps-ssp's bound", {0, 1000000});
  cli::add_int(app, "--repeats", repeats, "runs of each row (the median is shown)", {1, 99});
  cli::add_real(app, "--target", given_target, "loss target (default: 70% of the first loss)",
                {.min = 0, .min_exclusive = true});
  cli::add_path(app, "--json", json_path, "write every figure as JSON");
  cli::add_path(app, "--plot", plot_stem, "write STEM.csv and STEM.svg: the loss curves");
  return cli::bench_main(app, argc, argv, [&] {
    train::RunSpec spec = train::standard_run(model);
    spec.steps = steps;
    spec.batch = batch;
    spec.validate();
    DTW_CHECK_ARG(batch >= workers, "--batch " << batch << " is too small for " << workers
                                               << " workers: each needs at least one row");
    // Every output is checked before anything is measured.
    if (!json_path.empty()) check_writable(json_path, "--json");
    if (!plot_stem.empty()) {
      check_writable(plot_stem + ".csv", "--plot");
      check_writable(plot_stem + ".svg", "--plot");
    }
    check_distinct_outputs({{json_path, "--json"},
                            {plot_stem.empty() ? "" : plot_stem + ".csv", "--plot (the curves)"},
                            {plot_stem.empty() ? "" : plot_stem + ".svg", "--plot (the plot)"}});
    double target = given_target.value_or(0);
    const int ranks = 1 + workers;
    const std::string f = fmt::format("{:g}", factor);
    json out = {{"model", model}, {"workers", workers}, {"servers", 1}, {"steps", steps},
                {"factor", factor}, {"staleness", staleness}};
    double load = 0;
    if (std::ifstream in("/proc/loadavg"); in) in >> load;
    cli::print_rows_code();
    fmt::print("dtw bench parameter-server: {}, 1 server + {} workers, {} steps of batch {}, "
               "AdamW, float32, threads backend (load average {:.1f})\n",
               model, workers, steps, spec.batch, load);
    out["load_average"] = load;

    // 1. Stragglers. Each (slowness, strategy) runs `repeats` times, the
    // strategies interleaved so that a change in the machine's load hits all
    // of them; the median run (by tokens/s) is reported.
    struct Slowness {
      std::string label, knob;
      double predicted_async;  // throughput(async) / throughput(sync) by the cost model
    };
    const double w = workers, p = 0.25;
    const double e_max = 1 + (factor - 1) * (1 - std::pow(1 - p, w));  // E[max_w f] with jitter
    std::vector<Slowness> slowness = {
        {"none", "straggler=", 1.0},
        {"1 straggler", "straggler=0:" + f, (w - 1 + 1 / factor) * factor / w},
        {"2 stragglers", "straggler=0:" + f + ",1:" + f, (w - 2 + 2 / factor) * factor / w},
        {"jitter", fmt::format("jitter={}:{:g}", f, p), e_max / (1 + (factor - 1) * p)}};
    // One worker has no second one to slow (ps_layout refuses worker 1).
    if (workers < 2) slowness.erase(slowness.begin() + 2);
    std::vector<Run> curves;
    fmt::print("\n{:<13} {:<9} {:>9} {:>7} {:>8} {:>10} {:>10} {:>9} {:>10}\n", "slow workers",
               "strategy", "tokens/s", "x sync", "(model)", "updates/s", "to target", "seconds",
               "last loss");
    for (const Slowness& slow : slowness) {
      std::map<std::string, std::vector<Run>> runs;
      for (int rep = 0; rep < repeats; ++rep)
        for (const std::string name : {"ps-sync", "ps-ssp", "ps-async"}) {
          // staleness is ps-ssp's knob only: the others refuse it.
          std::vector<std::string> knobs{slow.knob};
          if (name == "ps-ssp") knobs.push_back("staleness=" + std::to_string(staleness));
          Run r = train_once(name, spec, ranks, knobs);
          r.slow = slow.label;
          runs[name].push_back(std::move(r));
        }
      const auto rate = [&](const Run& r) {
        return static_cast<double>(spec.steps * spec.tokens_per_step()) / r.total;
      };
      double sync_rate = 0;
      for (const std::string name : {"ps-sync", "ps-ssp", "ps-async"}) {
        std::vector<Run>& v = runs[name];
        std::sort(v.begin(), v.end(), [&](const Run& a, const Run& b) { return rate(a) < rate(b); });
        const Run& r = v[v.size() / 2];
        if (target <= 0) target = 0.7 * r.losses.front();
        if (name == "ps-sync") sync_rate = rate(r);
        const std::string model_ratio =
            name == "ps-sync" ? "1" : name == "ps-async" ? fmt::format("{:.2f}", slow.predicted_async)
                                                         : (slow.label == "jitter" ? "-" : "1");
        const std::int64_t at = step_to(r.losses, target);
        const double last = mean_of_last(r.losses, 5);
        fmt::print("{:<13} {:<9} {:>9.0f} {:>7.2f} {:>8} {:>10.1f} {:>10} {:>9} {:>10.3f}\n",
                   slow.label, name, rate(r), rate(r) / sync_rate, model_ratio,
                   static_cast<double>(r.updates) / r.total,
                   at < 0 ? std::string("never") : std::to_string(at),
                   at < 0 ? std::string("-") : fmt::format("{:.2f}", r.seconds[static_cast<std::size_t>(at)]),
                   last);
        json rates = json::array();
        for (const Run& x : v) rates.push_back(rate(x));
        out["stragglers"].push_back({{"slow", slow.label}, {"knob", slow.knob}, {"strategy", name},
                                     {"tokens_per_s", rate(r)}, {"tokens_per_s_runs", rates},
                                     {"vs_sync", rate(r) / sync_rate}, {"model_vs_sync", model_ratio},
                                     {"updates_per_s", static_cast<double>(r.updates) / r.total},
                                     {"steps_to_target", at},
                                     {"seconds_to_target", at < 0 ? json(nullptr) : json(r.seconds[static_cast<std::size_t>(at)])},
                                     {"last_loss", last}});
        if (slow.label == "1 straggler") curves.push_back(r);
      }
    }
    out["target"] = target;
    fmt::print("(median of {} runs by tokens/s; model: the cost model's throughput against ps-sync;\n"
               " to target: the first step where the mean of the last 5 losses is below {:.3f})\n",
               repeats, target);

    // 2. The server's link against W (server_link_bench.cpp).
    dtw::ch03::bench::server_link_table(spec, out);

    // 3. Loss curves with one straggler.
    if (!plot_stem.empty()) {
      std::ostringstream csv;
      csv << "strategy,step,seconds,loss\n";
      for (const Run& r : curves)
        for (std::size_t i = 0; i < r.losses.size(); ++i)
          csv << r.strategy << ',' << i << ',' << r.seconds[i] << ',' << r.losses[i] << '\n';
      write_file(plot_stem + ".csv", csv.str(), "--plot");
      fmt::print("\nwrote {}.csv\n", plot_stem);
      dtw::ch03::bench::plot(plot_stem + ".csv", plot_stem + ".svg",
           fmt::format("{}, 1 server + {} workers, worker 0 {}x slower", model, workers, f));
    }
    if (!json_path.empty()) {
      write_file(json_path, out.dump(2) + "\n", "--json");
      fmt::print("wrote {}\n", json_path);
    }
    return cli::kExitOk;
  });
}
