#include "loop/transpose_tiles.h"

#include <optional>

#include "loop/lane_analysis.h"
#include "loop/stmt_functor.h"

namespace tessera::loop {

namespace {

bool is_power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// The load `value` copies: the value itself, or the load of select(c, load, constant).
const ir::Expr* copied_load(const ir::Expr& value) {
  if (value->kind == ir::ExprKind::kLoad) return &value;
  if (value->kind == ir::ExprKind::kSelect && value->operands[1]->kind == ir::ExprKind::kLoad &&
      value->operands[2]->is_const()) {
    return &value->operands[1];
  }
  return nullptr;
}

class TransposeTiles : public StmtMutator {
 protected:
  Stmt mutate_for(const Stmt& s) override {
    if (auto tiled = as_register_tile(s)) return *tiled;
    return StmtMutator::mutate_for(s);
  }

 private:
  // `s` = unrolled for u: vectorized for v: out[..] = g(in[..]) in the form the header states.
  std::optional<Stmt> as_register_tile(const Stmt& s) {
    if (s->for_kind != ForKind::kUnrolled || !s->min->is_const_int(0) ||
        !s->extent->is_const_int()) {
      return std::nullopt;
    }
    const Stmt& inner = s->body;
    if (inner->kind != StmtKind::kFor || inner->for_kind != ForKind::kVectorized ||
        !inner->min->is_const_int(0) || !inner->extent->is_const_int()) {
      return std::nullopt;
    }
    const int64_t lanes = inner->extent->int_value;
    if (s->extent->int_value != lanes || lanes < 4 || !is_power_of_two(lanes)) return std::nullopt;
    const Stmt& store = inner->body;
    if (store->kind != StmtKind::kStore) return std::nullopt;
    const ir::Expr* load = copied_load(store->value);
    if (load == nullptr) return std::nullopt;
    const ir::ExprNode* u = s->var.get();
    const ir::ExprNode* v = inner->var.get();
    const ir::Expr& in_index = (*load)->operands[0];
    const std::optional<int64_t> in_v = lane_stride(in_index, v, {});
    if (lane_stride(in_index, u, {}) != 1 || (in_v && (*in_v == 1 || *in_v == 0)) ||
        lane_stride(store->index, v, {}) != 1) {
      return std::nullopt;
    }
    // Only the load may depend on u (the condition and the constant may not), and the value
    // must be computable per row: nothing else reads memory.
    if (store->value.get() != load->get() && mentions(store->value->operands[0], u, {})) {
      return std::nullopt;
    }
    const ir::Buffer tile = ir::make_buffer(store->buffer->name + "_tile", store->buffer->dtype,
                                            {ir::int_imm(lanes * lanes)}, ir::MemScope::kRegister);
    const ir::Expr l = ir::int_imm(lanes);
    // Rows: v unrolled, u the lanes.
    const ir::Var row = ir::var(inner->var->name + "_row", 0, lanes - 1);
    const ir::Var col = ir::var(s->var->name + "_lane", 0, lanes - 1);
    ir::VarMap rows_map{{v, row}, {u, col}};
    const Stmt write_rows =
        make_for(row, ir::int_imm(0), l, ForKind::kUnrolled,
                 make_for(col, ir::int_imm(0), l, ForKind::kVectorized,
                          make_store(tile, row * l + col, ir::substitute(store->value, rows_map))));
    // Columns: the original loops, reading the tile.
    const Stmt read_columns =
        make_for(s->var, s->min, s->extent, ForKind::kUnrolled,
                 make_for(inner->var, inner->min, inner->extent, ForKind::kVectorized,
                          make_store(store->buffer, store->index,
                                     ir::load(tile, ir::Expr(inner->var) * l + ir::Expr(s->var)))));
    return make_allocate(tile, make_seq({write_rows, read_columns}));
  }
};

}  // namespace

Stmt transpose_register_tiles(const Stmt& s) {
  TransposeTiles t;
  return t.mutate(s);
}

}  // namespace tessera::loop
