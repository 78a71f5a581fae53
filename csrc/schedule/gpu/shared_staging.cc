#include "schedule/gpu/shared_staging.h"

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "util/check.h"

namespace tessera::schedule::gpu {

using ir::Expr;

namespace {

// Whether `e` reads a tiled variable.
bool uses_tiled(const Expr& e, const VarTiles& tiles) {
  bool found = false;
  ir::visit_expr(e, [&](const Expr& n) { found = found || (n->is_var() && tiles.count(n.get())); });
  return found;
}

// Region of one index expression: its first element and its extent, or nothing when it is not
// affine in the tiled variables.
struct DimRegion {
  Expr origin;
  int64_t extent = 1;
};

std::optional<DimRegion> dim_region(const Expr& index, const VarTiles& tiles) {
  ir::LinearParseOptions opts;
  opts.distribute = false;
  const ir::LinearForm f = ir::to_linear(index, opts);
  if (f.invalid) return std::nullopt;
  Expr origin = ir::int_imm(f.constant);
  int64_t extent = 1;
  for (const ir::LinearTerm& t : f.terms) {
    const Expr mono = ir::monomial_expr(t.atoms);
    const Expr scaled = ir::int_imm(t.coef) * mono;
    if (!uses_tiled(mono, tiles)) {  // the same for the whole block and step
      origin = origin + scaled;
      continue;
    }
    if (t.atoms.size() != 1 || !t.atoms[0]->is_var()) return std::nullopt;
    const VarTile& vt = tiles.at(t.atoms[0].get());
    const int64_t span = t.coef * (vt.tile - 1);
    origin = origin + ir::int_imm(t.coef) * vt.base;
    // A negative coefficient reaches its lowest value at the last local offset.
    if (span < 0) origin = origin + ir::int_imm(span);
    extent += span < 0 ? -span : span;
  }
  return DimRegion{origin, extent};
}

// Row-major coordinates of `flat` in a box of constant extents.
std::vector<Expr> unflatten(const Expr& flat, const std::vector<int64_t>& extents) {
  std::vector<Expr> coords(extents.size());
  Expr rest = flat;
  for (size_t d = extents.size(); d-- > 0;) {
    coords[d] = d == 0 ? rest : ir::floormod(rest, ir::int_imm(extents[d]));
    rest = ir::floordiv(rest, ir::int_imm(extents[d]));
  }
  return coords;
}

bool same_indices(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!ir::expr_equal(a[i], b[i])) return false;
  }
  return true;
}

class StagedReader : public ir::ExprMutator {
 public:
  explicit StagedReader(const std::vector<StagedAccess>& staged) : staged_(staged) {}

  Expr mutate(const Expr& e) override {
    if (e->kind != ir::ExprKind::kAccess) return mutate_children(e);
    for (const StagedAccess& s : staged_) {
      if (s.tensor.get() != e->tensor.get() || !same_indices(s.indices, e->operands)) continue;
      std::vector<Expr> local;
      for (size_t d = 0; d < s.indices.size(); ++d) local.push_back(s.indices[d] - s.origin[d]);
      return ir::load(s.shared, ir::flat_index(s.shared, local));
    }
    return mutate_children(e);
  }

 private:
  const std::vector<StagedAccess>& staged_;
};

}  // namespace

std::optional<StagedAccess> stage_region(const Expr& access, const VarTiles& tiles,
                                         const std::string& name) {
  TESSERA_CHECK(access->kind == ir::ExprKind::kAccess) << "stage_region: not an access";
  StagedAccess s;
  s.tensor = access->tensor;
  s.indices = access->operands;
  std::vector<Expr> extents;
  for (const Expr& index : s.indices) {
    const std::optional<DimRegion> r = dim_region(index, tiles);
    if (!r) return std::nullopt;
    s.origin.push_back(r->origin);
    extents.push_back(ir::int_imm(r->extent));
  }
  s.shared = ir::make_buffer(name, s.tensor->dtype, extents, ir::MemScope::kShared);
  return s;
}

int64_t shared_elements(const StagedAccess& s) {
  int64_t n = 1;
  for (const Expr& d : s.shared->shape) n *= d->int_value;
  return n;
}

loop::Stmt cooperative_fetch(const StagedAccess& s, const Expr& thread, int64_t threads,
                             const AccessLowering& al) {
  const int64_t n = shared_elements(s);
  std::vector<int64_t> extents;
  for (const Expr& d : s.shared->shape) extents.push_back(d->int_value);
  const ir::Var step = ir::var(s.shared->name + "_fetch", 0, (n + threads - 1) / threads - 1);
  const Expr flat = ir::Expr(step) * ir::int_imm(threads) + thread;
  const std::vector<Expr> local = unflatten(flat, extents);
  std::vector<Expr> global;
  Expr in_bounds = ir::bool_imm(true);
  for (size_t d = 0; d < local.size(); ++d) {
    global.push_back(s.origin[d] + local[d]);
    in_bounds = ir::logical_and(in_bounds, ir::logical_and(ir::ge(global[d], ir::int_imm(0)),
                                                           ir::lt(global[d], s.tensor->shape[d])));
  }
  const loop::Stmt copy = loop::make_if(
      in_bounds, loop::make_store(s.shared, flat, al.lower(ir::access(s.tensor, global))),
      loop::make_store(s.shared, flat, ir::make_const(s.tensor->dtype, s.tensor->pad_value)));
  // The last step may cover fewer elements than there are threads.
  const loop::Stmt body =
      n % threads == 0 ? copy : loop::make_if(ir::lt(flat, ir::int_imm(n)), copy);
  return loop::make_for(step, ir::int_imm(0), ir::int_imm((n + threads - 1) / threads),
                        loop::ForKind::kSerial, body);
}

Expr read_staged(const Expr& e, const std::vector<StagedAccess>& staged) {
  return StagedReader(staged).mutate(e);
}

}  // namespace tessera::schedule::gpu
