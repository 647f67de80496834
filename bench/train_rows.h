#pragma once
// dtw bench train's rows: one strategy run through the training harness and
// measured beside its formulas (run_row), its timelines' file stem, and the
// table of rows (train_report.cpp runs them; docs/architecture.md lists the
// JSON keys).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtw/train/fabric.h"
#include "dtw/train/strategy.h"

namespace dtw::bench {

// One row: its JSON (the keys of --json) and the reference mismatch, if any.
struct Row {
  nlohmann::json j;
  std::string mismatch;
};

// The stem of a row's two timelines (STEM.svg, STEM-<fabric>.svg):
// SVG_STEM-<strategy>-p<P>, then the sweep's label (" m=4": "-m4").
std::string timeline_stem(const std::string& svg_stem, const std::string& strategy, int ranks,
                          std::string label);

// Runs `strategy` on `ranks` ranks and measures its row; with a non-empty
// `svg_stem`, writes the measured and the modeled timeline. `device` is
// HarnessOptions::device ("": the backend's own place; "cuda": threads ranks
// on the machine's GPUs).
Row run_row(const train::Strategy& strategy, const train::RunSpec& spec, int ranks,
            const std::string& backend, const std::string& device, const train::Knobs& knobs,
            const train::Cluster& fabric, const std::string& svg_stem,
            const std::string& label_suffix = "");

// The table of `rows`, tokens/s relative to the first.
void print_table(const std::vector<Row>& rows);

}  // namespace dtw::bench
