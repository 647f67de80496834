#pragma once
// dtw train's timeline: where each rank's time went, printed (every rank up
// to 16, a summary beyond: least, median and most of each column with the
// rank named) and written whole, with the losses, to --json.
#include <cstdint>
#include <string>
#include <vector>

#include "dtw/launch.h"
#include "dtw/train/fabric.h"
#include "dtw/train/timeline.h"

namespace dtw::cli {

// A run's timeline, measured and replayed on a modeled fabric.
struct TimelineFigures {
  train::Timeline measured;
  train::Replay modeled;
  std::string fabric;  // the modeled cluster's name
  std::int64_t steps = 1;
};
TimelineFigures timeline_figures(const Report& report, int ranks, const train::Cluster& fabric,
                                 std::int64_t steps);

// Prints the timeline table: every rank up to 16, a summary beyond.
void print_timeline(const TimelineFigures& figures);

// Writes the last three steps' timeline (the whole run when it is that short) as an SVG.
void write_timeline(const Report& report, int ranks, std::int64_t steps, const std::string& name,
                    const std::string& path);

// What `dtw train --json FILE` writes besides the timeline and the memory.
struct TrainJson {
  std::string strategy;
  std::string model;
  std::string hyperparameters;  // RunSpec::hyperparameters()
  double seconds = 0;
  std::vector<double> losses;
};
// Writes the run, its losses, every rank's timeline row and every rank's
// memory peaks (the terminal summarises both beyond 16 ranks).
void write_train_json(const std::string& path, const TrainJson& run, const Report& report,
                      const TimelineFigures& figures);

}  // namespace dtw::cli
