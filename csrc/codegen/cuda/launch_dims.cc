#include "codegen/cuda/launch_dims.h"

#include <set>

#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/structural_hash.h"
#include "loop/stmt_functor.h"
#include "util/check.h"

namespace tessera::codegen::cuda {

namespace {

// Index of `k` in LaunchDims: 0..2 for blocks x..z, 3..5 for threads x..z.
int slot(loop::ForKind k) {
  switch (k) {
    case loop::ForKind::kGpuBlockX:
      return 0;
    case loop::ForKind::kGpuBlockY:
      return 1;
    case loop::ForKind::kGpuBlockZ:
      return 2;
    case loop::ForKind::kGpuThreadX:
      return 3;
    case loop::ForKind::kGpuThreadY:
      return 4;
    case loop::ForKind::kGpuThreadZ:
      return 5;
    default:
      return -1;
  }
}

class DimsCollector : public loop::StmtVisitor {
 public:
  explicit DimsCollector(const loop::LoweredFunc& f) {
    for (const ir::Var& v : f.size_vars) size_vars_.insert(v.get());
  }

  LaunchDims dims() const {
    LaunchDims d;
    for (int i = 0; i < 3; ++i) {
      d.grid[i] = extent_[i].defined() ? extent_[i] : ir::int_imm(1);
      d.block[i] = extent_[i + 3].defined() ? extent_[i + 3] : ir::int_imm(1);
    }
    return d;
  }

 protected:
  void visit_for(const loop::Stmt& s) override {
    const int k = slot(s->for_kind);
    if (k < 0) return loop::StmtVisitor::visit_for(s);
    const char* name = loop::for_kind_name(s->for_kind);
    TESSERA_CHECK(s->min->is_const_int(0))
        << "loop " << s->var->name << " bound to " << name << " must start at 0";
    TESSERA_CHECK(!open_[k]) << "loop " << s->var->name << " is bound to " << name
                             << " inside another loop bound to it";
    check_host_computable(s->extent, s->var->name);
    if (!extent_[k].defined()) {
      extent_[k] = s->extent;
    } else {
      TESSERA_CHECK(ir::structural_equal(extent_[k], s->extent))
          << "loops bound to " << name << " have different extents: " << ir::to_string(extent_[k])
          << " and " << ir::to_string(s->extent);
    }
    open_[k] = true;
    visit(s->body);
    open_[k] = false;
  }

 private:
  void check_host_computable(const ir::Expr& extent, const std::string& loop_name) const {
    ir::visit_expr(extent, [&](const ir::Expr& e) {
      TESSERA_CHECK(e->kind != ir::ExprKind::kLoad && e->kind != ir::ExprKind::kAccess)
          << "extent of GPU loop " << loop_name << " reads memory";
      TESSERA_CHECK(!e->is_var() || size_vars_.count(e.get()))
          << "extent of GPU loop " << loop_name << " reads " << e->name
          << ", which is not a size variable";
    });
  }

  std::set<const ir::ExprNode*> size_vars_;
  std::array<ir::Expr, 6> extent_;
  std::array<bool, 6> open_{};
};

}  // namespace

LaunchDims launch_dims(const loop::LoweredFunc& f) {
  DimsCollector c(f);
  c.visit(f.body);
  return c.dims();
}

}  // namespace tessera::codegen::cuda
