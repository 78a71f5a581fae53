#include "schedule/plan_choices.h"

#include "util/check.h"

namespace tessera::schedule {

using util::Json;

const char* pad_placement_name(PadPlacement p) {
  switch (p) {
    case PadPlacement::kMaterialize:
      return "materialize";
    case PadPlacement::kInline:
      return "inline";
  }
  return "?";
}

const char* epilogue_placement_name(EpiloguePlacement e) {
  switch (e) {
    case EpiloguePlacement::kFused:
      return "fused";
    case EpiloguePlacement::kSeparate:
      return "separate";
  }
  return "?";
}

PadPlacement pad_placement_from_name(const std::string& name) {
  for (PadPlacement p : {PadPlacement::kMaterialize, PadPlacement::kInline}) {
    if (name == pad_placement_name(p)) return p;
  }
  TESSERA_FAIL() << "plan: pad must be 'materialize' or 'inline', got '" << name << "'";
}

EpiloguePlacement epilogue_placement_from_name(const std::string& name) {
  for (EpiloguePlacement e : {EpiloguePlacement::kFused, EpiloguePlacement::kSeparate}) {
    if (name == epilogue_placement_name(e)) return e;
  }
  TESSERA_FAIL() << "plan: epilogue must be 'fused' or 'separate', got '" << name << "'";
}

Json PlanChoices::to_json() const {
  Json j = Json::object();
  j["pad"] = pad_placement_name(pad);
  j["epilogue"] = epilogue_placement_name(epilogue);
  if (!hoist_invariants) j["hoist"] = false;
  return j;
}

PlanChoices PlanChoices::from_json(const Json& j) {
  TESSERA_CHECK(j.is_object()) << "plan: expected an object, got " << j.dump();
  PlanChoices c;
  c.pad = pad_placement_from_name(j.get_string("pad", pad_placement_name(c.pad)));
  c.epilogue =
      epilogue_placement_from_name(j.get_string("epilogue", epilogue_placement_name(c.epilogue)));
  c.hoist_invariants = j.get_bool("hoist", c.hoist_invariants);
  return c;
}

std::string PlanChoices::text() const {
  return std::string("pad=") + pad_placement_name(pad) +
         " epilogue=" + epilogue_placement_name(epilogue) + (hoist_invariants ? "" : " hoist=off");
}

std::vector<PlanChoices> PlanChoices::all() {
  std::vector<PlanChoices> out;
  for (PadPlacement p : {PadPlacement::kMaterialize, PadPlacement::kInline}) {
    for (EpiloguePlacement e : {EpiloguePlacement::kFused, EpiloguePlacement::kSeparate}) {
      out.push_back(PlanChoices{p, e});
    }
  }
  return out;
}

}  // namespace tessera::schedule
