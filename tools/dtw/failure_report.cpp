#include "failure_report.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace dtw::cli {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Paths under `root`, and paths relative to the build folder ("../tests/x.cpp",
// as ccache's CCACHE_BASEDIR leaves __FILE__), are shown from the repository root.
std::string strip_root(std::string text, const std::string& root) {
  for (std::size_t at; !root.empty() && (at = text.find(root)) != std::string::npos;)
    text.erase(at, root.size());
  static const std::regex kUp(R"((^|[\s"])(\.\./)+)");
  return std::regex_replace(text, kUp, "$1");
}

void add_context(FailureReport& report, const std::string& text) {
  if (!text.empty() && std::ranges::find(report.context, text) == report.context.end())
    report.context.push_back(text);
}

}  // namespace

FailureReport parse_failure(const std::string& failure, const std::string& root) {
  FailureReport report;
  std::vector<std::string> lines = lines_of(strip_root(failure, root));
  // The first line says where: "path:line" or "unknown file" for an exception.
  static const std::regex kWhere(R"(^(\S+:\d+|unknown file)$)");
  if (!lines.empty() && std::regex_match(lines.front(), kWhere)) {
    if (lines.front() != "unknown file") report.location = lines.front();
    lines.erase(lines.begin());
  }
  // GoogleTest's trace ("Google Test trace:" then "path:line: text", innermost first).
  const auto trace = std::ranges::find(lines, "Google Test trace:");
  static const std::regex kTraceLine(R"(^\S+:\d+: (.*)$)");
  std::vector<std::string> trace_lines;
  for (auto it = trace == lines.end() ? lines.end() : trace + 1; it != lines.end(); ++it) {
    std::smatch m;
    trace_lines.push_back(std::regex_match(*it, m, kTraceLine) ? m[1].str() : *it);
  }
  lines.erase(trace, lines.end());

  // An escaped exception: C++ exception with description "WHAT" thrown in the test body.
  static const std::string kOpen = "C++ exception with description \"";
  static const std::string kClose = "\" thrown in the test body.";
  std::string text;
  for (const std::string& l : lines) text += (text.empty() ? "" : "\n") + l;
  if (text.starts_with(kOpen)) {
    report.exception = true;
    text.erase(0, kOpen.size());
    if (text.ends_with(kClose)) text.erase(text.size() - kClose.size());
    lines = lines_of(text);
  }
  // dtw::Error notes ("  while: ...") are context, innermost first.
  static const std::string kWhile = "  while: ";
  for (const std::string& l : lines)
    if (l.starts_with(kWhile)) add_context(report, l.substr(kWhile.size()));
  std::erase_if(lines, [](const std::string& l) { return l.starts_with(kWhile); });

  // DTW_EXPECT_SAME's EXPECT_TRUE wrapping and ADD_FAILURE's "Failed" say
  // nothing; EXPECT_EQ's "    Which is: 3" goes on its expression's line.
  const bool dtw_mismatch = text.find("dtw_mismatch_") != std::string::npos;
  static const std::string kWhich = "    Which is: ";
  for (const std::string& l : lines) {
    if (l.find_first_not_of(' ') == std::string::npos || l == "Failed" || (dtw_mismatch && (l.starts_with("Value of: dtw_mismatch_") ||
                                           l == "  Actual: false" || l == "Expected: true")))
      continue;
    if (l.starts_with(kWhich) && !report.message.empty()) {
      report.message.back() += " = " + l.substr(kWhich.size());
      continue;
    }
    report.message.push_back(l);
  }
  // "rank R of P" lines of rank threads go last: the context lines say more.
  std::vector<std::string> ranks;
  for (const std::string& t : trace_lines) {
    if (t.starts_with("rank ") && t.find(" of ") != std::string::npos) {
      ranks.push_back(t);
      continue;
    }
    add_context(report, t);
  }
  const bool message_names_rank =
      !report.message.empty() && report.message.front().starts_with("rank ");
  if (!message_names_rank)
    for (const std::string& r : ranks) add_context(report, r);
  return report;
}

}  // namespace dtw::cli
