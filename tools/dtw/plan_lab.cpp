// `plan` in chapter 08's lab-run program (dtw_ch08_lab_run), which links the
// learner's chapter 08: `dtw plan --lab` hands its arguments over to it, and
// plan_command then predicts with the learner's ch08::plan.
#include "commands.h"
#include "lab_run.h"

namespace dtw::cli {
namespace {

PlanOptions options;

const bool kRegistered = [] {
  lab_run_commands().push_back(
      {.add = [](CLI::App& app) { return add_plan_subcommand(app, options); },
       .run = [] {
         options.lab = true;
         options.lab_program = true;
         return plan_command(options);
       }});
  return true;
}();

}  // namespace
}  // namespace dtw::cli
