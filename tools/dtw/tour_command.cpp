// dtw tour: every chapter's demos, with the solution, on the threads backend,
// in one table, and a short run of the reference trainer (the model the
// training chapters build on) -- the quickest way to see what the workbench does.
#include <fmt/format.h>

#include <chrono>

#include "commands.h"
#include "dtw/model/config.h"
#include "dtw/model/trainer.h"
#include "dtw/train/run_spec.h"
#include "demo_runner.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {
namespace {

struct Row {
  std::string chapter, demo, ranks, check, time, bytes, busbw, detail;
  Paint check_paint = Paint::kGreen;
};

// The one-line story of a run: a rank's detail, or what went wrong.
std::string detail_of(const Demo& demo, const DemoOutcome& outcome) {
  if (const RankError* caught = pitfall_catch(demo, outcome)) return "caught: " + caught->message;
  if (demo.expects_deadlock && outcome.deadlock) return "detector reported the wait-for cycle";
  if (!outcome.failures.empty())
    return outcome.failures.front().kind + ": " + outcome.failures.front().message;
  for (const std::optional<DemoCheck>& c : outcome.checks)
    if (c && !c->correct) return c->detail;
  for (const std::optional<DemoCheck>& c : outcome.checks)
    if (c && !c->detail.empty()) return c->detail;
  return "";
}

// The model every training chapter trains, on one device: the loss must fall
// (the synthetic task is learnable, so 20 steps cut it by well over a third).
Row reference_training_row() {
  constexpr std::int64_t kSteps = 20;
  Row row{"--", "train gpt-tiny", "1", "", "", "-", "-", ""};
  try {
    const auto start = std::chrono::steady_clock::now();
    // The standard run, on the synthetic task without warm-up: learnable in 20 steps.
    train::RunSpec spec = train::standard_run("gpt-tiny");
    spec.steps = kSteps;
    spec.task = model::TokenTask::kSynthetic;
    spec.warmup_steps = 0;
    const auto result = model::train_reference<float>(spec.config(), spec.steps, spec.options());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool fell = result.losses.back() < 0.7 * result.losses.front();
    row.check = fell ? "ok" : "WRONG";
    row.check_paint = fell ? Paint::kGreen : Paint::kRed;
    row.time = human_seconds(seconds);
    row.detail = fmt::format("loss {:.2f} -> {:.2f} in {} steps (dtw train for more)",
                             result.losses.front(), result.losses.back(), kSteps);
  } catch (const std::exception& e) {
    row.check = "WRONG";
    row.check_paint = Paint::kRed;
    row.detail = e.what();
  }
  return row;
}

std::string clip(std::string text, std::size_t width) {
  if (const auto nl = text.find('\n'); nl != std::string::npos) text = text.substr(0, nl);
  return text.size() > width ? text.substr(0, width - 3) + "..." : text;
}

}  // namespace

int tour_command() {
  if (demos().empty()) {
    fmt::print("No demos are registered yet.\n");
    return 0;
  }
  std::vector<Row> rows;
  bool all_intended = true;
  for (const Demo& demo : demos()) {
    fmt::print(stderr, "{}",
               color_enabled() ? fmt::format("\r\x1b[Krunning {} ...", demo.name) : "");
    DemoOutcome outcome;
    try {
      // Demos may print their own tables; the tour shows only its own.
      StdoutSilencer quiet;
      outcome = run_demo(demo, 0, "threads", false);
    } catch (const std::exception& e) {
      outcome.failures.push_back({-1, "Error", e.what()});
    }
    const bool intended = as_intended(demo, outcome);
    all_intended = all_intended && intended;
    Row row{demo.chapter,
            demo.name,
            std::to_string(outcome.checks.size()),
            verdict(demo, outcome),
            human_seconds(outcome.report.seconds),
            human_bytes(static_cast<double>(outcome.report.total_bytes())),
            outcome.busbw_gbps() > 0 ? bandwidth_text(outcome.busbw_gbps() * 1e9) : "-",
            clip(detail_of(demo, outcome), 60)};
    row.check_paint = !intended                                       ? Paint::kRed
                      : demo.expects_deadlock || !demo.catches.empty() ? Paint::kYellow
                                                                        : Paint::kGreen;
    rows.push_back(std::move(row));
  }
  rows.push_back(reference_training_row());
  all_intended = all_intended && rows.back().check == "ok";
  if (color_enabled()) fmt::print(stderr, "\r\x1b[K");

  const Row header{"ch", "demo", "ranks", "check", "time", "bytes", "busbw", "detail"};
  std::size_t w[7] = {};
  const auto widen = [&](const Row& r) {
    const std::string* cells[7] = {&r.chapter, &r.demo,  &r.ranks, &r.check,
                                   &r.time,    &r.bytes, &r.busbw};
    for (int i = 0; i < 7; ++i) w[i] = std::max(w[i], cells[i]->size());
  };
  widen(header);
  for (const Row& r : rows) widen(r);
  const auto print_row = [&](const Row& r, bool head) {
    const Paint p = head ? Paint::kBold : r.check_paint;
    fmt::print(
        "{}  {}  {:>{}}  {}  {:>{}}  {:>{}}  {:>{}}  {}\n",
        paint_padded(head ? Paint::kBold : Paint::kDim, r.chapter, w[0]),
        head ? paint_padded(Paint::kBold, r.demo, w[1]) : fmt::format("{:<{}}", r.demo, w[1]),
        r.ranks, w[2], paint_padded(p, r.check, w[3]), r.time, w[4], r.bytes, w[5], r.busbw, w[6],
        head ? paint(Paint::kBold, r.detail) : paint(Paint::kDim, r.detail));
  };
  print_row(header, true);
  for (const Row& r : rows) print_row(r, false);
  fmt::print("\n{}\n",
             all_intended
                 ? paint(Paint::kGreen, "Every demo did what it should.")
                 : paint(Paint::kRed, "Some demos gave a WRONG result (see the check column)."));
  fmt::print("{}\n",
             paint(Paint::kDim, "dtw run NAME shows one demo in detail; dtw list shows the labs."));
  return all_intended ? 0 : 1;
}

}  // namespace dtw::cli
