#pragma once
// Operator matching (EinNet 5.1) through the iterator mapping table.
//
// Iterator mapping table (paper Table 2) for a scope reading I0 and I1 and writing O: an
// iterator's group is which of (I0, I1, O) its indices mention. Matmul-like operators are
// matched by grouping (Y/Y/Y batch, Y/N/Y m, N/Y/Y n, Y/Y/N k), then flattening each group:
// in every tensor a group indexes, its iterators must form one strided block (coefficients of
// the flattened index with coef[i] = coef[i+1] * extent[i+1]); the block's stride is the
// operator attribute (lda, ldb, transposition).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "derive/state.h"

namespace tessera::derive {

enum class OperatorKind { kElementwise, kMatmul, kBatchMatmul, kConv2d, kG2bmm };
const char* operator_kind_name(OperatorKind k);
// The predefined operators the search derives towards, in the table's order.
const std::vector<OperatorKind>& table_operators();

// Placeholders whose values are known at compile time (model weights).
struct DeriveContext {
  std::set<const ir::TensorNode*> weights;
  bool is_weight(const ir::Tensor& t) const { return weights.count(t.get()) != 0; }
};

// How one tensor is read by a matched matmul-like operator.
struct OperandLayout {
  ir::Tensor tensor;
  ir::Expr access;               // the read in the scope body (for the output: null)
  std::vector<int64_t> strides;  // flattened stride per role, in the operator's role order
  int64_t offset = 0;            // flattened index at the zero point
  // Some group is not one strided block in this tensor: a layout eOperator must rewrite it
  // first (free when the tensor is a weight: folded at compile time).
  bool needs_layout = false;
  // Some index may fall outside the tensor's shape (reads padding): not a plain view.
  int padded_dims = 0;
};

// Conv2d roles (the conv row of Table 2): n, oh, ow index X and O; the output channels (any
// number of iterators, flattened into one channel dimension) index K and O; c, r, s index X
// and K. Iterators of extent 1 are left out.
struct ConvRoles {
  std::vector<ir::IterVar> n, f, c;  // batch (<= 1), output channels, input channel (<= 1)
  std::vector<ir::IterVar> oh, ow;   // output rows, columns (1 each)
  std::vector<ir::IterVar> r, s;     // kernel rows, columns (<= 1 each)
  std::vector<int64_t> x_shape;      // ops::conv2d's input: X as stored, [N, C, H, W]
  std::vector<int64_t> w_shape;      // ops::conv2d's weight W'[F, C, R, S] (a layout of K)
};

struct OperatorMatch {
  OperatorKind kind = OperatorKind::kMatmul;
  ir::Tensor scope;
  // Matmul-like: iterators per role, in flattening order (outermost first). Iterators of
  // extent 1 are left out (they index 0 everywhere).
  std::vector<ir::IterVar> batch, m, n, k;
  int64_t B = 1, M = 1, N = 1, K = 1;
  OperandLayout a, b, out;  // a = I0 [batch, m, k], b = I1 [batch, k, n], out [batch, m, n]
  // The output is an intermediate whose traversal order the instantiation may permute.
  bool out_layout_free = false;
  // Conv2d (NCHW x OIHW): stride, padding, dilation per spatial dim, and the roles. `b` is the
  // kernel read; it needs a layout (folded at compile time for weights) unless it reads
  // K[f, c, r, s] exactly.
  std::vector<int64_t> stride, padding, dilation;
  ConvRoles conv;
  // G2BMM: the dimension of I1 (`b`) the band runs along, and the dilation (the coefficient of
  // the band offset iterator w in its index).
  int band_dim = -1;
  int64_t band_dilation = 0;
  // Iterators whose group the operator does not have (mismatches, EinNet's distance).
  int mismatched = 0;
};

// G2BMM (Table 2's banded batch matmul, Longformer attention): sum_k I0[.., m, k] * I1[.., band,
// k] where a traversal iterator w (the band offset) indexes I1 and the output but not I0, in one
// dimension of I1 whose index is (an expression of other iterators, among them a traversal
// iterator that I0 reads too: the row m) + D * w. I1 may be laid out in any way otherwise; the
// operator is Tessera's kernel of the scope itself, fast along a unit-stride band, so the
// distance is 0 for D = +-1 and 1 for a dilated band. Reads of I1 outside its shape are the
// band's edges, which the kernel masks: they add no distance.

// Matches `scope` against `kind`. The result describes the best tensor mapping found;
// `distance` is 0 when the scope is the operator up to operand layouts (which layout
// eOperators provide), else the number of mismatched iterators plus index dimensions that may
// read padding.
struct MatchOutcome {
  std::optional<OperatorMatch> match;  // set when the expression has the operator's shape
  int distance = 0;
};
MatchOutcome match_operator(const State& s, const ir::Tensor& scope, OperatorKind kind,
                            const DeriveContext& ctx);

}  // namespace tessera::derive
