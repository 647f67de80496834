// The timeline as an SVG: a lane per rank, compute above, communication below.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/output_file.h"
#include "dtw/train/timeline.h"

namespace dtw::train {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A readable step for an axis of `span` seconds: 1, 2 or 5 × 10^k.
double tick_step(double span) {
  const double raw = span / 8, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string time_label(double s) {
  std::ostringstream o;
  o.precision(3);
  if (s == 0) o << "0";
  else if (s < 1e-3) o << s * 1e6 << " us";
  else if (s < 1) o << s * 1e3 << " ms";
  else o << s << " s";
  return o.str();
}

// Compute boxes: blue, a lighter shade per pipeline stage.
const char* compute_colour(int stage) {
  static const char* shades[] = {"#3b6fb6", "#5b8fd6", "#2a4f86", "#7aa7e0"};
  return shades[stage < 0 ? 0 : stage % 4];
}

}  // namespace

void write_timeline_svg(const std::vector<TraceEvent>& all, int world, const std::string& title,
                        const std::string& path, double from_us, double to_us) {
  std::vector<TraceEvent> events;  // those in the window, clipped to it
  for (const TraceEvent& e : all) {
    if (e.end_us < from_us || e.start_us > to_us) continue;
    events.push_back(e);
    events.back().start_us = std::max(e.start_us, from_us);
    events.back().end_us = std::min(e.end_us, to_us);
  }
  DTW_CHECK_ARG(world >= 1, "write_timeline_svg: world " << world << " must be at least 1");
  double first = 1e300, last = -1e300;
  for (const TraceEvent& e : events) {
    if (e.category != "compute" && e.category != "comm") continue;
    first = std::min(first, e.start_us * 1e-6);
    last = std::max(last, e.end_us * 1e-6);
  }
  if (last <= first) {
    first = 0;
    last = 1e-6;
  }
  const double span = last - first;
  const int left = 70, right = 20, top = 48, lane = 44, width = 1200;
  const int plot = width - left - right;
  const int height = top + world * lane + 60;
  auto x_of = [&](double s) { return left + (s - first) / span * plot; };
  std::ostringstream svg;
  svg.precision(6);
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">"
      << escape(title) << "</text>\n";
  // Legend.
  const int ly = 34;
  svg << "<rect x=\"" << left << "\" y=\"" << ly - 9 << "\" width=\"12\" height=\"10\" fill=\""
      << compute_colour(0) << "\"/><text x=\"" << left + 16 << "\" y=\"" << ly
      << "\">compute (number: micro-batch)</text>\n"
      << "<rect x=\"" << left + 210 << "\" y=\"" << ly - 9
      << "\" width=\"12\" height=\"10\" fill=\"#e08a2c\"/><text x=\"" << left + 226 << "\" y=\""
      << ly << "\">send in flight</text>\n"
      << "<rect x=\"" << left + 330 << "\" y=\"" << ly - 9
      << "\" width=\"12\" height=\"10\" fill=\"#3a9a5b\"/><text x=\"" << left + 346 << "\" y=\""
      << ly << "\">receive in flight</text>\n";
  for (int r = 0; r < world; ++r) {
    const int y = top + r * lane;
    svg << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << plot << "\" height=\""
        << lane - 6 << "\" fill=\"" << (r % 2 ? "#f4f4f4" : "#fafafa") << "\"/>\n"
        << "<text x=\"8\" y=\"" << y + lane / 2 << "\">rank " << r << "</text>\n";
  }
  std::size_t drawn = 0;
  for (const TraceEvent& e : events) {
    const bool compute = e.category == "compute", comm = e.category == "comm";
    if ((!compute && !comm) || e.rank < 0 || e.rank >= world) continue;
    if (++drawn > 50000) break;  // a viewer chokes beyond this; the figures use every event
    const double x0 = x_of(e.start_us * 1e-6), x1 = x_of(e.end_us * 1e-6);
    const double w = std::max(x1 - x0, 0.5);
    const int y = top + e.rank * lane;
    if (compute) {
      svg << "<rect x=\"" << x0 << "\" y=\"" << y + 2 << "\" width=\"" << w
          << "\" height=\"" << (lane - 6) / 2 << "\" fill=\"" << compute_colour(e.stage)
          << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << escape(e.name);
      if (e.stage >= 0) svg << ", stage " << e.stage;
      if (e.micro_batch >= 0) svg << ", micro-batch " << e.micro_batch;
      svg << ", " << time_label((e.end_us - e.start_us) * 1e-6) << "</title></rect>\n";
      if (e.micro_batch >= 0 && w >= 10)
        svg << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y + 15
            << "\" fill=\"white\" text-anchor=\"middle\" font-size=\"10\">" << e.micro_batch
            << "</text>\n";
    } else {
      const int half = (lane - 6) / 2;
      const int cy = y + 2 + half + (e.is_send ? 1 : half / 2 + 1);
      svg << "<rect x=\"" << x0 << "\" y=\"" << cy << "\" width=\"" << w << "\" height=\""
          << half / 2 - 1 << "\" fill=\"" << (e.is_send ? "#e08a2c" : "#3a9a5b")
          << "\" opacity=\"0.85\"><title>" << escape(e.name) << (e.is_send ? " to " : " from ")
          << "rank " << e.peer << ", " << e.bytes << " bytes, "
          << time_label((e.end_us - e.start_us) * 1e-6) << "</title></rect>\n";
    }
  }
  // Time axis.
  const int ay = top + world * lane + 8;
  svg << "<line x1=\"" << left << "\" y1=\"" << ay << "\" x2=\"" << left + plot << "\" y2=\"" << ay
      << "\" stroke=\"black\"/>\n";
  const double step = tick_step(span);
  for (double t = 0; t <= span * 1.0001; t += step) {
    const double x = x_of(first + t);
    svg << "<line x1=\"" << x << "\" y1=\"" << ay << "\" x2=\"" << x << "\" y2=\"" << ay + 5
        << "\" stroke=\"black\"/><text x=\"" << x << "\" y=\"" << ay + 18
        << "\" text-anchor=\"middle\">" << time_label(t) << "</text>\n";
  }
  svg << "</svg>\n";
  write_file(path, svg.str(), "the timeline");
}

}  // namespace dtw::train
