// The parameter server's knobs and its scripted arrival order. Nothing here
// is a lab step: it is the configuration every strategy of the chapter reads,
// written once so that a bad knob is the same clear error in all of them.
//
// Knobs are checked on every rank before any message moves: every rank parses
// the same strings, so every rank raises the same InvalidArgument and nothing
// is left waiting for a partner that gave up.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/random.h"
#include "parameter_server.h"

namespace dtw::ch03 {
namespace {

// "a,b,c" -> {"a", "b", "c"}; an empty string gives no items.
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) items.push_back(item);
  if (text.back() == sep) items.emplace_back();
  return items;
}

// A whole decimal number, or InvalidArgument naming the knob.
std::int64_t whole(const std::string& text, const char* knob, const std::string& value) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  DTW_CHECK_ARG(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
                "ps: " << knob << "=" << value << ": '" << text << "' is not a whole number");
  return v;
}

// "w:x" pairs (straggler=1:3, crash=2:5): the worker and the number after it.
std::pair<int, std::string> worker_pair(const std::string& item, const char* knob,
                                        const std::string& value) {
  const std::size_t colon = item.find(':');
  DTW_CHECK_ARG(colon != std::string::npos,
                "ps: " << knob << "=" << value << ": '" << item << "' must read WORKER:VALUE");
  const std::int64_t w = whole(item.substr(0, colon), knob, value);
  DTW_CHECK_ARG(w >= 0 && w < (1 << 20),
                "ps: " << knob << "=" << value << ": worker " << w << " is not a worker index");
  return {static_cast<int>(w), item.substr(colon + 1)};
}

}  // namespace

double PsOptions::slowdown_of(int w) const {
  return w >= 0 && w < static_cast<int>(slowdown.size()) ? slowdown[static_cast<std::size_t>(w)]
                                                         : 1.0;
}

double PsOptions::factor(int w, std::int64_t step) const {
  const bool slow = jitter_odds > 0 &&
                    model::uniform01(model::hash_key(0x6a177e5, static_cast<std::uint64_t>(w),
                                                     static_cast<std::uint64_t>(step))) <
                        jitter_odds;
  return std::max(slowdown_of(w), slow ? jitter_factor : 1.0);
}

std::vector<train::Knob> ps_knobs(std::string_view strategy) {
  // The table of parameter_server.h, beside the parser that reads it.
  const auto workers = [](int ranks, const train::Knobs& knobs) {
    return knobs.has("workers") ? knobs.get("workers", "")
                                : std::to_string(ranks - knobs.get_int("servers", 1));
  };
  std::vector<train::Knob> k = {
      {.name = "servers", .default_value = "1", .help = "server ranks S (ranks 0 ... S-1)"},
      {.name = "workers",
       .default_value = "ranks - S",
       .help = "worker ranks W; must equal ranks - S",
       .default_for = [=](const train::RunSpec&, int ranks,
                          const train::Knobs& knobs) { return workers(ranks, knobs); }},
      {.name = "ranges", .default_value = "even", .help = "server shards b-e,... covering [0, Ψ)"},
      {.name = "straggler",
       .default_value = "none",
       .help = "w:f,...: worker w takes f x its compute time (sleeps f-1 x); 1 <= f <= 100, "
               "each worker once"},
      {.name = "jitter",
       .default_value = "none",
       .help = "f:p: every worker takes f x (1 <= f <= 100) on a share p of its steps"},
      {.name = "order",
       .default_value = "arrival",
       .help = "arrival (pushes as they come) or scripted (the order the factors imply)"},
      {.name = "crash",
       .default_value = "none",
       .help = "w:k: worker w fails before its push of step k, 1 ... steps as the progress "
               "line counts (a fault drill)"}};
  if (strategy == "ps-ssp")
    k.push_back({.name = "staleness",
                 .default_value = "2",
                 .help = "clocks a worker may run ahead of the slowest (0: ps-sync; inf: no bound)"});
  if (strategy == "ps-async")
    k.push_back({.name = "lr_scale",
                 .default_value = "1/W",
                 .help = "the servers' learning-rate factor (0: 1/W)",
                 .default_for = [=](const train::RunSpec&, int ranks, const train::Knobs& knobs) {
                   return "1/" + workers(ranks, knobs);
                 }});
  return k;
}

PsOptions ps_options(const train::Knobs& knobs) {
  PsOptions o;
  o.servers = static_cast<int>(knobs.get_int("servers", 1));
  o.workers = static_cast<int>(knobs.get_int("workers", 0));
  DTW_CHECK_ARG(knobs.get_int("servers", 1) >= 1,
                "ps: servers=" << knobs.get("servers", "") << ": there must be at least one server");
  DTW_CHECK_ARG(!knobs.has("workers") || knobs.get_int("workers", 0) >= 1,
                "ps: workers=" << knobs.get("workers", "") << ": there must be at least one worker");

  const std::string ranges = knobs.get("ranges", "");
  for (const std::string& item : split(ranges, ',')) {
    const std::size_t dash = item.find('-');
    DTW_CHECK_ARG(dash != std::string::npos,
                  "ps: ranges=" << ranges << ": '" << item << "' must read BEGIN-END");
    o.ranges.push_back({whole(item.substr(0, dash), "ranges", ranges),
                        whole(item.substr(dash + 1), "ranges", ranges)});
  }

  const std::string s = knobs.get("staleness", "2");
  o.staleness = s == "inf" ? PsOptions::kUnbounded : whole(s, "staleness", s);
  DTW_CHECK_ARG(o.staleness >= 0, "ps: staleness=" << s
                                                   << " is negative; 0 is synchronous, inf unbounded");

  const std::string stragglers = knobs.get("straggler", "");
  std::vector<int> named;  // the workers straggler= has named so far
  for (const std::string& item : split(stragglers, ',')) {
    const auto [w, f] = worker_pair(item, "straggler", stragglers);
    // Worker 0 twice (0:2,0:3): which factor was meant? Refused, not the last kept.
    DTW_CHECK_ARG(std::find(named.begin(), named.end(), w) == named.end(),
                  "ps: straggler=" << stragglers << ": worker " << w
                                   << " is named twice; give each worker one factor");
    named.push_back(w);
    double factor = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), factor);
    DTW_CHECK_ARG(ec == std::errc() && end == f.data() + f.size() && std::isfinite(factor) &&
                      factor >= 1 && factor <= PsOptions::kMaxSlowdown,
                  "ps: straggler=" << stragglers << ": worker " << w << "'s factor '" << f
                                   << "' must be a number in [1, " << PsOptions::kMaxSlowdown
                                   << "] (its compute time is multiplied by it)");
    if (static_cast<int>(o.slowdown.size()) <= w) o.slowdown.resize(static_cast<std::size_t>(w) + 1, 1.0);
    o.slowdown[static_cast<std::size_t>(w)] = factor;
  }

  if (knobs.has("jitter")) {
    const std::string jitter = knobs.get("jitter", "");
    const std::size_t colon = jitter.find(':');
    double f = 0, p = -1;
    if (colon != std::string::npos) {
      const std::string a = jitter.substr(0, colon), b = jitter.substr(colon + 1);
      const auto ra = std::from_chars(a.data(), a.data() + a.size(), f);
      const auto rb = std::from_chars(b.data(), b.data() + b.size(), p);
      if (ra.ec != std::errc() || ra.ptr != a.data() + a.size() || rb.ec != std::errc() ||
          rb.ptr != b.data() + b.size())
        p = -1;
    }
    DTW_CHECK_ARG(p >= 0 && p <= 1 && std::isfinite(f) && f >= 1 && f <= PsOptions::kMaxSlowdown,
                  "ps: jitter=" << jitter << ": must read FACTOR:SHARE, a factor in [1, "
                                << PsOptions::kMaxSlowdown << "] and a share in [0, 1]");
    o.jitter_factor = f;
    o.jitter_odds = p;
  }

  const std::string order = knobs.get("order", "arrival");
  DTW_CHECK_ARG(order == "arrival" || order == "scripted",
                "ps: order=" << order << ": use arrival (as pushes come) or scripted");
  o.scripted = order == "scripted";

  o.lr_scale = knobs.get_double("lr_scale", 0);
  DTW_CHECK_ARG(o.lr_scale >= 0 && std::isfinite(o.lr_scale),
                "ps: lr_scale=" << knobs.get("lr_scale", "") << " must be a positive number");

  if (knobs.has("crash")) {
    const std::string crash = knobs.get("crash", "");
    const auto [w, k] = worker_pair(crash, "crash", crash);
    o.crash_worker = w;
    o.crash_step = whole(k, "crash", crash);
    // Steps count from 1, as the progress line does ("step 1/N"); the end is
    // checked against the run's steps with the spec (check_ps).
    DTW_CHECK_ARG(o.crash_step >= 1, "ps: crash=" << crash << ": step " << o.crash_step
                                                  << " is not a step; steps count from 1, as "
                                                     "the progress line does");
  }
  return o;
}

ArrivalScript::ArrivalScript(int workers, const PsOptions& options)
    : options_(options),
      due_(static_cast<std::size_t>(workers), -1.0),
      step_(static_cast<std::size_t>(workers), 0) {}

int ArrivalScript::next() {
  int best = -1;
  for (int w = 0; w < static_cast<int>(due_.size()); ++w) {
    if (due_[static_cast<std::size_t>(w)] < 0) continue;
    if (best < 0 || due_[static_cast<std::size_t>(w)] < due_[static_cast<std::size_t>(best)])
      best = w;
  }
  DTW_CHECK(best >= 0, Error, "ArrivalScript::next: no worker is computing (a protocol bug)");
  now_ = due_[static_cast<std::size_t>(best)];
  due_[static_cast<std::size_t>(best)] = -1;
  return best;
}

bool ArrivalScript::computing() const {
  return std::any_of(due_.begin(), due_.end(), [](double d) { return d >= 0; });
}

void ArrivalScript::released(int w) {
  const auto i = static_cast<std::size_t>(w);
  due_[i] = now_ + options_.factor(w, step_[i]++);
}

}  // namespace dtw::ch03
