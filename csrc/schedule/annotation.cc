#include "schedule/annotation.h"

#include "util/check.h"

namespace tessera::schedule {

using util::Json;

const char* sketch_name(Sketch s) {
  switch (s) {
    case Sketch::kMultiLevelTiling:
      return "multi_level_tiling";
    case Sketch::kCrossLaneReduction:
      return "cross_lane_reduction";
  }
  return "?";
}

Sketch sketch_from_name(const std::string& name) {
  for (Sketch s : {Sketch::kMultiLevelTiling, Sketch::kCrossLaneReduction}) {
    if (name == sketch_name(s)) return s;
  }
  TESSERA_FAIL() << "unknown sketch '" << name << "'";
}

const char* edge_mode_name(EdgeMode e) {
  switch (e) {
    case EdgeMode::kSplit:
      return "split";
    case EdgeMode::kLocalPad:
      return "local_pad";
    case EdgeMode::kGuard:
      return "guard";
  }
  return "?";
}

EdgeMode edge_mode_from_name(const std::string& name) {
  for (EdgeMode e : {EdgeMode::kSplit, EdgeMode::kLocalPad, EdgeMode::kGuard}) {
    if (name == edge_mode_name(e)) return e;
  }
  TESSERA_FAIL() << "unknown edge mode '" << name << "' (split, local_pad or guard)";
}

namespace {
template <typename T>
Json to_array(const std::vector<T>& v) {
  Json a = Json::array();
  for (const T& x : v) a.push_back(Json(x));
  return a;
}

std::vector<int64_t> int_list(const Json& j, const char* key) {
  std::vector<int64_t> out;
  if (const Json* a = j.find(key)) {
    for (const Json& x : a->as_array()) out.push_back(x.as_int());
  }
  return out;
}
}  // namespace

std::vector<int> StageAnnotation::s1_loop_order() const {
  if (!s1_order.empty()) return s1_order;
  std::vector<int> order(tile_outer.size());
  for (size_t a = 0; a < order.size(); ++a) order[a] = static_cast<int>(a);
  return order;
}

std::vector<int64_t> StageAnnotation::mid_tiles() const {
  return tile_mid.empty() ? tile_outer : tile_mid;
}

bool StageAnnotation::has_mid_level() const { return !tile_mid.empty() && tile_mid != tile_outer; }

Json StageAnnotation::to_json() const {
  Json j = Json::object();
  j["sketch"] = sketch_name(sketch);
  j["op"] = op;
  j["tile_outer"] = to_array(tile_outer);
  // Written only when it splits a cache tile, so that three-level schedules keep their text.
  if (has_mid_level()) j["tile_mid"] = to_array(tile_mid);
  j["tile_reg"] = to_array(tile_reg);
  j["tile_reduce"] = to_array(tile_reduce);
  j["vector_axis"] = vector_axis;
  j["vector_width"] = vector_width;
  j["s1_order"] = to_array(s1_order);
  j["pack"] = to_array(pack);
  j["parallel"] = parallel;
  // Written only when set, so that schedules from before the option keep their text (and keys).
  if (prefetch) j["prefetch"] = true;
  if (reduce_unroll != 1) j["reduce_unroll"] = reduce_unroll;
  if (edge != EdgeMode::kSplit) j["edge"] = edge_mode_name(edge);
  if (skew_axis >= 0) j["skew_axis"] = skew_axis;
  return j;
}

StageAnnotation StageAnnotation::from_json(const Json& j) {
  StageAnnotation a;
  a.sketch = sketch_from_name(j.get_string("sketch", "multi_level_tiling"));
  a.op = j.get_string("op", "");
  a.tile_outer = int_list(j, "tile_outer");
  a.tile_mid = int_list(j, "tile_mid");
  a.tile_reg = int_list(j, "tile_reg");
  a.tile_reduce = int_list(j, "tile_reduce");
  a.vector_axis = static_cast<int>(j.get_int("vector_axis", -1));
  a.vector_width = static_cast<int>(j.get_int("vector_width", 1));
  for (int64_t x : int_list(j, "s1_order")) a.s1_order.push_back(static_cast<int>(x));
  if (const Json* p = j.find("pack")) {
    for (const Json& x : p->as_array()) a.pack.push_back(x.as_string());
  }
  a.parallel = j.get_bool("parallel", true);
  a.prefetch = j.get_bool("prefetch", false);
  a.reduce_unroll = j.get_int("reduce_unroll", 1);
  a.edge = edge_mode_from_name(j.get_string("edge", edge_mode_name(EdgeMode::kSplit)));
  a.skew_axis = static_cast<int>(j.get_int("skew_axis", -1));
  return a;
}

Json KernelSchedule::to_json() const {
  Json j = Json::object();
  j["tuner"] = tuner;
  // Written only when not the defaults, so that schedules from before the choices keep their text.
  if (!plan.is_default()) j["plan"] = plan.to_json();
  Json s = Json::array();
  for (const StageAnnotation& a : stages) s.push_back(a.to_json());
  j["stages"] = s;
  if (!layouts.empty()) {
    Json l = Json::object();
    for (const auto& [name, text] : layouts) l[name] = text;
    j["layouts"] = l;
  }
  return j;
}

std::string KernelSchedule::stages_text() const {
  Json s = Json::array();
  for (const StageAnnotation& a : stages) s.push_back(a.to_json());
  if (plan.is_default()) return s.dump();
  Json j = Json::object();
  j["plan"] = plan.to_json();
  j["stages"] = s;
  return j.dump();
}

KernelSchedule KernelSchedule::from_json(const Json& j) {
  KernelSchedule k;
  k.tuner = j.get_string("tuner", "default");
  if (const Json* p = j.find("plan")) k.plan = PlanChoices::from_json(*p);
  for (const Json& s : j.at("stages").as_array()) k.stages.push_back(StageAnnotation::from_json(s));
  if (const Json* l = j.find("layouts")) {
    for (const auto& [name, text] : l->as_object()) k.layouts[name] = text.as_string();
  }
  return k;
}

}  // namespace tessera::schedule
