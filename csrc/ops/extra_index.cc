#include "ops/extra_index.h"

#include "ops/common.h"
#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

// The index value read from the data, as an index-typed expression clamped into [0, extent).
Expr clamped_index(const Expr& value, const Expr& extent) {
  Expr i = value->dtype == ir::kIndexType ? value : ir::cast(ir::kIndexType, value);
  return ir::max(ir::min(i, ir::sub(extent, ir::int_imm(1))), ir::int_imm(0));
}

void check_index_dtype(const Tensor& idx, const std::string& name) {
  TESSERA_CHECK(ir::is_int(idx->dtype)) << name << ": indices " << idx->name
                                        << " must be integers, not " << ir::dtype_name(idx->dtype);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& indices, const std::string& name) {
  TESSERA_CHECK(x != nullptr && indices != nullptr) << name << ": operand is null";
  check_index_dtype(indices, name);
  const int64_t a = normalize_axis(axis, x->ndim(), name);
  const int k = indices->ndim();
  Shape shape(x->shape.begin(), x->shape.begin() + a);
  shape.insert(shape.end(), indices->shape.begin(), indices->shape.end());
  shape.insert(shape.end(), x->shape.begin() + a + 1, x->shape.end());
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx_pos(v.begin() + a, v.begin() + a + k);
        Expr picked = clamped_index(ir::access(indices, idx_pos), x->shape[a]);
        std::vector<Expr> src(v.begin(), v.begin() + a);
        src.push_back(picked);
        src.insert(src.end(), v.begin() + a + k, v.end());
        return ir::access(x, src);
      },
      "injective");
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, const std::string& name) {
  TESSERA_CHECK(x != nullptr && index != nullptr) << name << ": operand is null";
  check_index_dtype(index, name);
  TESSERA_CHECK(index->ndim() == x->ndim())
      << name << ": index has " << index->ndim() << " dims, input " << x->ndim();
  const int64_t d = normalize_axis(dim, x->ndim(), name);
  return ir::compute(
      name, index->shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> src(v.begin(), v.end());
        src[d] = clamped_index(ir::access(index, src), x->shape[d]);
        return ir::access(x, src);
      },
      "injective");
}

}  // namespace tessera::ops
