#include "tune/search/diverse_pick.h"

#include <set>
#include <unordered_set>

#include "util/json.h"

namespace tessera::tune::search {

namespace {

void add_leaves(const util::Json& j, const std::string& path, std::vector<std::string>* out) {
  if (!j.is_object()) {
    out->push_back(path + "=" + j.dump());
    return;
  }
  for (const auto& [key, value] : j.as_object()) add_leaves(value, path + "/" + key, out);
}

// "path=value" -> "path" (paths are JSON keys and stage numbers: no '=' in them).
std::string path_of(const std::string& knob) { return knob.substr(0, knob.find('=')); }

}  // namespace

std::vector<std::string> schedule_knobs(const schedule::KernelSchedule& s) {
  std::vector<std::string> knobs;
  if (!s.plan.is_default()) add_leaves(s.plan.to_json(), "plan", &knobs);
  // Stages are positional: stage i's knobs are named by i.
  for (size_t i = 0; i < s.stages.size(); ++i)
    add_leaves(s.stages[i].to_json(), std::to_string(i), &knobs);
  for (const auto& [tensor, layout] : s.layouts) knobs.push_back("layout/" + tensor + "=" + layout);
  return knobs;
}

std::vector<std::vector<std::string>> knobs_of(const std::vector<schedule::KernelSchedule>& all) {
  std::vector<std::vector<std::string>> knobs;
  std::set<std::string> paths;
  for (const schedule::KernelSchedule& s : all) {
    knobs.push_back(schedule_knobs(s));
    for (const std::string& k : knobs.back()) paths.insert(path_of(k));
  }
  for (std::vector<std::string>& list : knobs) {
    std::set<std::string> absent = paths;
    for (const std::string& k : list) absent.erase(path_of(k));
    for (const std::string& p : absent) list.push_back(p + "=-");
  }
  return knobs;
}

std::vector<size_t> pick_for_coverage(const std::vector<std::vector<std::string>>& knobs, int n) {
  std::vector<size_t> picks;
  std::vector<bool> taken(knobs.size(), false);
  std::unordered_set<std::string> covered;
  while (static_cast<int>(picks.size()) < n && picks.size() < knobs.size()) {
    size_t best = knobs.size();
    int best_gain = -1;
    for (size_t i = 0; i < knobs.size(); ++i) {
      if (taken[i]) continue;
      int gain = 0;
      for (const std::string& k : knobs[i]) gain += covered.count(k) ? 0 : 1;
      if (gain > best_gain) {  // strict: the better-ranked wins a tie
        best_gain = gain;
        best = i;
      }
    }
    taken[best] = true;
    picks.push_back(best);
    covered.insert(knobs[best].begin(), knobs[best].end());
  }
  return picks;
}

}  // namespace tessera::tune::search
