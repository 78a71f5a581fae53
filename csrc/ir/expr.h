#pragma once
// Scalar and index expressions shared by the tensor-expression IR and the loop IR.
//
// One immutable node type (ExprNode) with a kind tag keeps pattern matching in the simplifier,
// the hashers and the code generators to a single switch. Nodes are shared (DAG), never mutated
// after construction; passes build new nodes. Variables are compared by identity (pointer).
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace tessera::ir {

struct ExprNode;
struct TensorNode;
struct BufferNode;
using Tensor = std::shared_ptr<const TensorNode>;
using Buffer = std::shared_ptr<const BufferNode>;

enum class ExprKind : uint8_t {
  kIntImm,
  kFloatImm,
  kVar,
  // Arithmetic. kDiv is true division (floats only); integer division is always floor division.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kFloorMod,
  kMin,
  kMax,
  // Comparisons and logic produce kBool.
  kEQ,
  kNE,
  kLT,
  kLE,
  kGT,
  kGE,
  kAnd,
  kOr,
  kNot,
  kSelect,  // operands: cond, true_value, false_value
  kCast,    // operands: value; dtype is the target
  kCall,    // call_op applied to operands
  kAccess,  // tensor-expression read: tensor[operands...] (multi-dimensional)
  kLoad,    // loop-IR read: buffer[operands[0]] (flat element index)
};

// Elementwise math functions. Code generators must implement each one for scalars and vectors.
enum class CallOp : uint8_t {
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kErf,
  kSigmoid,
  kAbs,
  kFloor,
  kCeil,
  kPow,  // two operands
};
const char* call_op_name(CallOp op);
int call_op_arity(CallOp op);

constexpr int64_t kNoLowerBound = std::numeric_limits<int64_t>::min();
constexpr int64_t kNoUpperBound = std::numeric_limits<int64_t>::max();

// Handle to an immutable expression node. Cheap to copy.
class Expr {
 public:
  Expr() = default;
  Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}  // NOLINT
  Expr(int value);                                                        // NOLINT: int64 IntImm
  Expr(int64_t value);                                                    // NOLINT: int64 IntImm
  Expr(double value);                                                     // NOLINT: fp32 FloatImm

  const ExprNode* operator->() const { return node_.get(); }
  const ExprNode& operator*() const { return *node_; }
  const ExprNode* get() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }
  // Identity comparison (same node). Structural comparison lives in structural_hash.h.
  bool same_as(const Expr& other) const { return node_ == other.node_; }
  const std::shared_ptr<const ExprNode>& node() const { return node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// A variable: loop iterator, summation iterator or symbolic size. The known constant range
// [lo, hi] (inclusive) feeds the simplifier; symbolic extents of iterators are expressed by
// the iterator's IterVar extent, with lo/hi as the constant envelope.
using Var = Expr;

struct ExprNode {
  ExprKind kind;
  DType dtype;
  int64_t int_value = 0;     // kIntImm
  double float_value = 0.0;  // kFloatImm
  CallOp call_op = CallOp::kExp;
  std::vector<Expr> operands;
  // kVar only.
  std::string name;
  int64_t lo = kNoLowerBound;
  int64_t hi = kNoUpperBound;
  uint64_t var_id = 0;  // unique per process; gives a stable order for canonical forms
  // kAccess only.
  Tensor tensor;
  // kLoad only.
  Buffer buffer;

  bool is_const_int() const { return kind == ExprKind::kIntImm; }
  bool is_const_int(int64_t v) const { return kind == ExprKind::kIntImm && int_value == v; }
  bool is_const() const { return kind == ExprKind::kIntImm || kind == ExprKind::kFloatImm; }
  bool is_var() const { return kind == ExprKind::kVar; }
};

// ---- constructors -------------------------------------------------------------------------
Expr int_imm(int64_t v, DType t = kIndexType);
Expr float_imm(double v, DType t = DType::kFloat32);
Expr bool_imm(bool v);
Expr make_const(DType t, double v);  // constant of any dtype
// New variable with a unique id. Bounds are inclusive; omit for unbounded.
Var var(const std::string& name, int64_t lo = kNoLowerBound, int64_t hi = kNoUpperBound,
        DType t = kIndexType);
// Size variable: a symbolic extent, known to lie in [lo, hi] (lo >= 0).
Var size_var(const std::string& name, int64_t lo = 0, int64_t hi = kNoUpperBound);

// Builders. They fold constants and trivial identities (x+0, x*1, x*0 for ints) so that lowered
// code stays readable; everything stronger is the simplifier's job.
Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr div(Expr a, Expr b);  // floats
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr lt(Expr a, Expr b);
Expr le(Expr a, Expr b);
Expr gt(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);
Expr logical_not(Expr a);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DType t, Expr v);
Expr call(CallOp op, std::vector<Expr> args);
Expr access(const Tensor& t, std::vector<Expr> indices);
Expr load(const Buffer& b, Expr flat_index);
// Generic node construction without folding (used by mutators to rebuild a node of the same kind).
Expr make_node(ExprKind kind, DType dtype, std::vector<Expr> operands);
// Rebuilds `e` with new operands, keeping every other field.
Expr with_operands(const Expr& e, std::vector<Expr> operands);

inline Expr operator+(Expr a, Expr b) { return add(std::move(a), std::move(b)); }
inline Expr operator-(Expr a, Expr b) { return sub(std::move(a), std::move(b)); }
inline Expr operator*(Expr a, Expr b) { return mul(std::move(a), std::move(b)); }
inline Expr operator-(Expr a) {
  Expr zero = make_const(a->dtype, 0);  // before the move: argument evaluation order is unspecified
  return sub(zero, std::move(a));
}

// Convenience math.
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr tanh(Expr x);
Expr erf(Expr x);
Expr sigmoid(Expr x);
// max(x, 0): keeps x where x == 0, so relu(-0.0) is -0.0 as in PyTorch.
Expr relu(Expr x);
// -x: for floats -0.0 - x, the IEEE negation (-(+0.0) is -0.0; 0.0 - x would give +0.0).
Expr neg(Expr x);
Expr gelu(Expr x);  // exact (erf) form, as torch's default

bool is_binary(ExprKind k);
bool is_comparison(ExprKind k);
const char* expr_kind_name(ExprKind k);

}  // namespace tessera::ir
