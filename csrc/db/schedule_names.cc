#include "db/schedule_names.h"

#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "util/json.h"

namespace tessera::db {

namespace {

using util::Json;

// This workload's names -> canonical id; -1 marks a name two tensors share.
std::unordered_map<std::string, int> ids_by_name(const WorkloadKey& key) {
  std::unordered_map<std::string, int> ids;
  for (size_t i = 0; i < key.tensor_names.size(); ++i) {
    auto [it, fresh] = ids.emplace(key.tensor_names[i], static_cast<int>(i));
    if (!fresh) it->second = -1;
  }
  return ids;
}

// "$<id>" -> id, or -1.
int parse_canonical_name(const std::string& s, size_t count) {
  if (s.size() < 2 || s[0] != '$') return -1;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
  }
  const long id = std::strtol(s.c_str() + 1, nullptr, 10);
  return id >= 0 && static_cast<size_t>(id) < count ? static_cast<int>(id) : -1;
}

// Applies `translate` (name -> new name and the tensor's canonical id, or -1) to "op" and "pack"
// of every stage and to the tensor names of "layouts", and permutes "tile_reduce" of stages whose
// op was identified.
template <typename Translate>
std::string rewrite(const WorkloadKey& key, const std::string& json, bool to_canonical,
                    const Translate& translate) {
  Json j;
  if (!Json::try_parse(json, &j, nullptr) || !j.is_object() || !j.contains("stages") ||
      !j["stages"].is_array()) {
    return json;
  }
  try {
    for (Json& stage : j["stages"].as_array()) {
      if (!stage.is_object()) continue;
      if (stage.contains("op") && stage["op"].is_string()) {
        auto [name, id] = translate(stage["op"].as_string());
        stage["op"] = name;
        const Json* tiles = stage.find("tile_reduce");
        if (id >= 0 && static_cast<size_t>(id) < key.reduce_order.size() && tiles &&
            tiles->is_array() && tiles->size() == key.reduce_order[id].size()) {
          // canonical[k] = own[order[k]]: summation position k of the canonical text is the
          // op's reduce axis order[k].
          const std::vector<int>& order = key.reduce_order[id];
          const Json::Array& from = tiles->as_array();
          Json::Array to(from.size());
          for (size_t k = 0; k < order.size(); ++k) {
            if (to_canonical) {
              to[k] = from[order[k]];
            } else {
              to[order[k]] = from[k];
            }
          }
          stage["tile_reduce"] = Json(std::move(to));
        }
      }
      if (stage.contains("pack") && stage["pack"].is_array()) {
        for (Json& p : stage["pack"].as_array()) {
          if (p.is_string()) p = Json(translate(p.as_string()).first);
        }
      }
    }
    if (const Json* layouts = j.find("layouts"); layouts && layouts->is_object()) {
      Json renamed = Json::object();
      for (const auto& [name, text] : layouts->as_object()) renamed[translate(name).first] = text;
      j["layouts"] = renamed;
    }
  } catch (const util::JsonError&) {
    return json;  // not shaped like a schedule: keep the text as it was
  }
  return j.dump();
}

}  // namespace

std::string schedule_to_canonical(const WorkloadKey& key, const std::string& schedule_json) {
  const auto ids = ids_by_name(key);
  return rewrite(key, schedule_json, true, [&](const std::string& name) {
    auto it = ids.find(name);
    if (it == ids.end() || it->second < 0) return std::make_pair(name, -1);
    return std::make_pair("$" + std::to_string(it->second), it->second);
  });
}

std::string schedule_from_canonical(const WorkloadKey& key, const std::string& canonical_json) {
  return rewrite(key, canonical_json, false, [&](const std::string& name) {
    const int id = parse_canonical_name(name, key.tensor_names.size());
    if (id < 0) return std::make_pair(name, -1);
    return std::make_pair(key.tensor_names[id], id);
  });
}

}  // namespace tessera::db
