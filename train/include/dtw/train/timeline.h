#pragma once
/// @file
/// Timelines: per-rank compute, communication and idle time, the bubble and
/// the overlap fractions, from a run's trace (measured) or from its replay on
/// a modeled fabric (fabric.h); and the timeline as an SVG.
///
/// What counts: events of category "compute" (RankRun::phase) are compute;
/// events of category "comm" (every send and receive, blocking or not, from
/// its post to its completion) are communication; "phase" events are labels
/// and count as neither. Per rank, over the span from the first compute or
/// communication event of any rank to the last one's end:
///   compute = |C|, comm = |M|, hidden = |C ∩ M| (communication in flight
///   while the rank computes), idle = span − |C ∪ M|,
/// with C and M the unions of the rank's compute and communication intervals.
/// bubble = 1 − Σ compute / (P · span): the share of rank-time not spent
/// computing (a pipeline's bubble when communication is fast); overlap =
/// Σ hidden / Σ comm: the share of communication time hidden under compute.

#include <cstdint>
#include <string>
#include <vector>

#include "dtw/trace.h"

namespace dtw::train {

/// One rank's totals, in seconds.
struct RankTimeline {
  int rank = 0;          ///< world rank
  double compute = 0;    ///< time computing
  double comm = 0;       ///< time with communication in flight
  double hidden = 0;     ///< communication in flight while computing
  double idle = 0;       ///< neither
};

/// The figures of one timeline.
struct Timeline {
  std::vector<RankTimeline> ranks;  ///< by world rank
  double span = 0;      ///< seconds from the first event to the last
  double bubble = 0;    ///< 1 − Σ compute / (P · span)
  double overlap = 0;   ///< Σ hidden / Σ comm; NaN without communication
  bool has_stages = false;  ///< some compute event names a pipeline stage
};

/// The figures of `events` for a world of `world` ranks (events of other
/// ranks are an InvalidArgument naming them).
Timeline analyze_timeline(const std::vector<TraceEvent>& events, int world);

/// Writes `events` as an SVG: one lane per rank, compute and communication
/// coloured (sends and receives apart), micro-batches numbered on compute
/// boxes and stage shown by shade, a time axis; `title` on top. Only the
/// window [from_us, to_us] is drawn (default: everything).
void write_timeline_svg(const std::vector<TraceEvent>& events, int world,
                        const std::string& title, const std::string& path,
                        double from_us = -1e300, double to_us = 1e300);

}  // namespace dtw::train
