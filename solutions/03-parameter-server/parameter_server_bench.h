#pragma once
// The parts of dtw bench parameter-server that live beside its main program
// (server_link_bench.cpp); parameter_server_bench.cpp runs them in order.
#include <nlohmann/json.hpp>
#include <string>

#include "dtw/train/strategy.h"

namespace dtw::ch03::bench {

// Part 2: one ps-sync step for W = 1, 2, 4, 8 workers and S = 1, 2 servers
// (the model of `spec`): prints the bytes on the busiest server link beside
// the formula and the busiest link of chapter 01's ring allreduce on W ranks,
// and appends each row to out["server_link"].
void server_link_table(const train::RunSpec& spec, nlohmann::json& out);

// Draws the loss curves of `csv` (strategy,step,seconds,loss) into `svg`
// against steps and against wall seconds, through gnuplot when it is installed
// ("no plot: ..." saying why when it is not drawn).
void plot(const std::string& csv, const std::string& svg, const std::string& title);

}  // namespace dtw::ch03::bench
