#pragma once
// Per-store features of a lowered kernel for the learned cost model (search mode), in the spirit
// of Ansor's 164: one fixed-length row per Store statement of the final loop IR, describing what
// that store costs where it sits in the loop nest. A program is the rows of all its stores; the
// model predicts a score per row and sums them (pack-sum).
//
// Every value is log-scaled: f = log2(1 + x) (one-hot entries stay 0/1). "Executions" N of a
// store = the product of the extents of its enclosing loops (an extent that is not a constant is
// replaced by its constant upper bound, or kUnknownExtent when it has none). Counts below are
// totals over the N executions unless they say "per execution".
//
// Work normalisation: W = the task's work (tune::Task::iteration_points(), the same for every
// schedule of a task). Totals that grow with the problem size are divided by W (marked "/ W"):
// ops, bytes and lines per point of work, executions per point. Scaling every extent of a task
// by the same factor leaves those features unchanged where tiles stay the same (a model trained
// on one task size ranks another), while quantities that are about the tile and the cache
// (extents, reuse distances, allocation sizes, per-execution counts) stay absolute. Within one
// task W is a constant, so the ranking one task's data can teach is unchanged by it.
//
// clang-format off
// | offset  | name                      | meaning                                                 |
// |---------|---------------------------|---------------------------------------------------------|
// | 0       | float_addsub              | float + and - in the stored value, x N / W              |
// | 1       | float_mul                 | float *, x N / W                                        |
// | 2       | float_div                 | float /, x N / W                                        |
// | 3       | float_cmp                 | float min/max/comparisons, x N / W                      |
// | 4       | float_math                | math calls (exp, tanh, sqrt...), x N / W                |
// | 5       | select                    | selects (any dtype), x N / W                            |
// | 6       | int_arith                 | integer + - * in value and indices, x N / W             |
// | 7       | int_divmod                | integer floordiv/floormod, x N / W                      |
// | 8       | logic                     | integer/bool comparisons and and/or/not, x N / W        |
// | 9       | cast                      | dtype casts, x N / W                                    |
// | 10-16   | vec_{num,prod,len,pos[4]} | vectorized loops around the store: how many, product of |
// |         |                           | their extents, extent of the innermost one, and where   |
// |         |                           | it is: one-hot none/innermost/middle/outermost          |
// | 17-23   | unroll_{...}              | the same for unrolled loops                             |
// | 24-30   | parallel_{...}            | the same for parallel loops                             |
// | 31-120  | buffer b = 0..4, 18 each  | the buffers the store touches (its own and those it     |
// |         | (offset 31 + 18 b + k)    | loads), largest total bytes first, zeros past the last. |
// |         |                           | Per buffer, k =                                         |
// |         |   0-2  access one-hot     |   read / write / read-write                             |
// |         |   3    bytes              |   accesses x N x element bytes / W                      |
// |         |   4    unique_bytes       |   distinct elements touched x element bytes / W         |
// |         |   5    lines              |   cache lines moved over the N executions (a line       |
// |         |                           |   serves consecutive executions along a small           |
// |         |                           |   innermost stride) / W                                 |
// |         |   6    unique_lines       |   distinct cache lines touched / W                      |
// |         |   7-9  reuse one-hot      |   loop reuse (a loop the index does not depend on) /    |
// |         |                           |   serial reuse (read more than once per execution) /    |
// |         |                           |   none                                                  |
// |         |   10   reuse_dis_iter     |   executions between two reuses                         |
// |         |   11   reuse_dis_bytes    |   bytes the store touches between two reuses            |
// |         |   12   reuse_ct           |   times each element is reused                          |
// |         |   13-16 {bytes, unique_bytes, lines, unique_lines} / max(1, reuse_ct) (all / W)     |
// |         |   17   stride             |   elements between consecutive executions along the     |
// |         |                           |   innermost loop the index depends on (0: none)         |
// | 121-130 | intensity[10]             | arithmetic intensity (float ops / unique bytes) of the  |
// |         |                           | loop nest cut at 10 depths, innermost to whole          |
// | 131     | alloc_bytes               | size of the stored buffer when the kernel allocates it  |
// |         |                           | (accumulators, packed panels, temporaries), else 0      |
// | 132     | alloc_outer_prod          | executions of its Allocate (loops outside it) / W       |
// | 133     | alloc_inner_prod          | N / executions of its Allocate                          |
// | 134     | alloc_prod                | alloc_bytes x executions of its Allocate / W            |
// | 135-138 | scope one-hot             | stored buffer's memory: global/heap/stack/register      |
// | 139     | outer_prod                | N / W, the executions per point of work                 |
// | 140     | num_loops                 | loops around the store                                  |
// | 141     | unroll_max_prod           | product of the unrolled loops' extents (code size)      |
// | 142     | if_depth                  | conditionals around the store (edge-tile paths)         |
// | 143     | program_row               | 0 on store rows, 1 on the program row (below)           |
// | 144     | analytic_speedup          | program row only: log2(estimate of the task's rules     |
// |         |                           | schedule / estimate of this program), Gensor's analytic |
// |         |                           | model; signed, not log-scaled; missing (NaN) when the   |
// |         |                           | model has no estimate. 0 on store rows                  |
// clang-format on
//
// The program row: search mode appends one row per program (append_program_row) with every
// store column 0. Pack-sum adds its score to the stores', so the model learns a correction on
// top of the analytic prior, whose meaning (predicted speedup over the rules) is the same for
// every task: it ranks programs of a task the model never saw far better than the store rows
// alone (benchmarks/cost_data.py heldout).
#include <cstdint>
#include <string>
#include <vector>

#include "loop/stmt.h"

namespace tessera::cost {

inline constexpr int kFeatureArith = 0;   // 10 arithmetic counts
inline constexpr int kFeatureLoops = 10;  // 3 x 7 annotation groups: vec, unroll, parallel
inline constexpr int kLoopGroupSize = 7;
inline constexpr int kFeatureBuffers = 31;  // kMaxBuffers x kBufferFeatures
inline constexpr int kMaxBuffers = 5;
inline constexpr int kBufferFeatures = 18;
inline constexpr int kFeatureIntensity = 121;  // kIntensitySamples
inline constexpr int kIntensitySamples = 10;
inline constexpr int kFeatureAlloc = 131;  // 4
inline constexpr int kFeatureScope = 135;  // 4
inline constexpr int kFeatureMisc = 139;   // 4
inline constexpr int kFeatureProgramRow = 143;
inline constexpr int kFeatureAnalyticSpeedup = 144;
inline constexpr int kNumFeatures = 145;
// Bump when the features change meaning: saved cost models (db/model_blob.h) of another version
// are not loaded.
// 2: totals per point of the task's work; 3: the program row.
inline constexpr int kFeatureVersion = 3;

// A loop extent with no constant upper bound counts as this many iterations.
inline constexpr int64_t kUnknownExtent = 256;
// Cache line size the line counts assume.
inline constexpr int kLineBytes = 64;

// The feature rows of one program: num_rows x kNumFeatures, row-major; one row per store, and
// the program row last where it was appended.
struct ProgramFeatures {
  int num_rows = 0;
  std::vector<float> values;
  const float* row(int i) const { return values.data() + static_cast<size_t>(i) * kNumFeatures; }
};

// One row per Store statement of f.body, in program order. `work` (> 0): W above, the size of
// the task f is a schedule of (tune::Task::iteration_points()).
ProgramFeatures extract_features(const loop::LoweredFunc& f, double work);

// Appends the program row; `analytic_speedup` as column 144 describes (NaN: no estimate).
void append_program_row(ProgramFeatures& f, double analytic_speedup);

// The table's names, one per offset (for dumps and tests).
const std::vector<std::string>& feature_names();

}  // namespace tessera::cost
