#pragma once
// A learned cost model saved in the records database, so that a later process ranks its first
// search round with what earlier processes learned. Keyed by model name, target and feature
// version: a model learned on another machine, or on features computed differently, is not used.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::db {

struct ModelBlob {
  std::string name;            // the model's name(), e.g. "xgboost"
  std::string target;          // WorkloadKey::target of the measurements it learned from
  int feature_version = 0;     // cost::kFeatureVersion of the features it was trained on
  std::vector<uint8_t> bytes;  // the model's own serialisation (XGBModel::save())
  int64_t samples = 0;         // programs it was trained on
  int64_t created = 0;         // unix time in seconds
  std::string version;         // Tessera version that wrote it
};

}  // namespace tessera::db
