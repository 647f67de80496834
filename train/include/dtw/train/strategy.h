#pragma once
/// @file
/// Training strategies, all of it: rank functions registered by name, and
/// the one harness that runs, checks and measures any of them. An umbrella
/// over the three headers, one per reader:
///
/// - rank_run.h — what a strategy author writes against: RankRun (the
///   communicator, the run, the knobs; record_loss, report, phase),
///   PhaseInfo, Diverged; and Knobs (knobs.h);
/// - strategy_registry.h — what a chapter declares: Strategy, Knob,
///   DTW_REGISTER_STRATEGY, find_strategy, check_strategy, the formulas'
///   FormulaInput;
/// - harness.h — what runs a strategy: run_ranks, run_strategy,
///   HarnessOptions and the outcomes.
///
/// Chapters include this one; the training layer's own files include only
/// what they read.

#include "dtw/train/harness.h"
#include "dtw/train/knobs.h"
#include "dtw/train/rank_run.h"
#include "dtw/train/strategy_registry.h"
