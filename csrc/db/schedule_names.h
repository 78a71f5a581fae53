#pragma once
// Translation of a schedule's JSON between a workload's own names and canonical names.
//
// A schedule refers to its workload by name (each stage's "op", the "pack" list of inputs) and by
// the order of the op's summation iterators ("tile_reduce"). The database stores schedules in
// canonical form ("$<id>" for the tensor with canonical id <id>, tile_reduce in canonical
// summation order), so a record written for one workload applies to any workload with the same
// key, whatever its names and reduce-axis order.
//
// Names that do not identify one tensor of the workload (missing, or shared by two tensors) are
// left as they are: the schedule then only applies to a workload that uses the same names, and
// lowering rejects it with a clear error otherwise. Text that is not a schedule is returned
// unchanged.
#include <string>

#include "db/workload_key.h"

namespace tessera::db {

std::string schedule_to_canonical(const WorkloadKey& key, const std::string& schedule_json);
std::string schedule_from_canonical(const WorkloadKey& key, const std::string& canonical_json);

}  // namespace tessera::db
