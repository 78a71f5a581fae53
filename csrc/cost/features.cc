#include "cost/features.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "ir/functor.h"
#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::cost {

using ir::Expr;
using ir::ExprKind;
using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;

namespace {

// Linear coefficients of an index expression over the enclosing loop variables (approximate
// where it is not affine: floordiv scales, floormod keeps, products and min/max/select keep
// every variable with the larger coefficient). Keyed by the loop variable's node.
using Coeffs = std::unordered_map<const ir::ExprNode*, double>;

void add_into(Coeffs& into, const Coeffs& from, double scale) {
  for (const auto& [v, c] : from) into[v] += scale * c;
}

void union_into(Coeffs& into, const Coeffs& from) {
  for (const auto& [v, c] : from) {
    double& slot = into[v];
    if (std::abs(c) > std::abs(slot)) slot = c;
  }
}

struct Loop {
  const ir::ExprNode* var = nullptr;
  double extent = 1;
  ForKind kind = ForKind::kSerial;
};

struct Alloc {
  const ir::BufferNode* buffer = nullptr;
  double outer_prod = 1;
};

// One buffer the store touches: its accesses in one execution and their index coefficients.
struct BufferUse {
  const ir::BufferNode* buffer = nullptr;
  int reads = 0;
  int writes = 0;
  Coeffs coeffs;
};

double upper_bound(const Expr& e) {
  if (e->is_const_int()) return static_cast<double>(std::max<int64_t>(0, e->int_value));
  const ir::ConstIntBound b = ir::const_int_bound(e);
  if (b.hi != ir::kNoUpperBound && b.hi >= 0) return static_cast<double>(b.hi);
  return static_cast<double>(kUnknownExtent);
}

double buffer_elements(const ir::BufferNode& b) {
  double n = 1;
  for (const Expr& d : b.shape) n *= upper_bound(d);
  return n;
}

class Extractor {
 public:
  ProgramFeatures run(const loop::LoweredFunc& f, double work) {
    TESSERA_CHECK(work > 0 && std::isfinite(work)) << "feature extraction: work " << work;
    func_ = &f;
    work_ = work;
    visit(f.body);
    for (float& x : out_.values) x = std::log2(1.0f + std::max(0.0f, x));
    return std::move(out_);
  }

 private:
  // A plain recursive walk: kinds it does not know are entered through their children, so new
  // statement kinds cost accuracy, not correctness.
  void visit(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::kFor:
        loops_.push_back({s->var.get(), upper_bound(s->extent), s->for_kind});
        visit(s->body);
        loops_.pop_back();
        return;
      case StmtKind::kLet: {
        const ir::ExprNode* v = s->var.get();
        auto old = lets_.find(v);
        std::optional<Coeffs> saved;
        if (old != lets_.end()) saved = old->second;
        lets_[v] = coeffs(s->value);
        visit(s->body);
        if (saved) {
          lets_[v] = *saved;
        } else {
          lets_.erase(v);
        }
        return;
      }
      case StmtKind::kIf:
        ++if_depth_;
        visit(s->then_case);
        visit(s->else_case);
        --if_depth_;
        return;
      case StmtKind::kStore:
        add_row(*s);
        return;
      case StmtKind::kAllocate:
        allocs_.push_back({s->buffer.get(), executions(0)});
        visit(s->body);
        allocs_.pop_back();
        return;
      case StmtKind::kSeq:
        for (const Stmt& c : s->seq) visit(c);
        return;
      case StmtKind::kParallelCall: {
        // An outlined parallel loop (loop/outline_parallel.h): its body runs once per iteration
        // of the call's range, as the kParallel loop it was.
        TESSERA_CHECK(s->callee >= 0 && static_cast<size_t>(s->callee) < func_->outlined.size())
            << "parallel call to a missing outlined body";
        const loop::OutlinedBody& body = func_->outlined[s->callee];
        loops_.push_back({body.var.get(), upper_bound(s->extent), loop::ForKind::kParallel});
        visit(body.body);
        loops_.pop_back();
        return;
      }
      default:
        visit(s->body);
        visit(s->then_case);
        visit(s->else_case);
        for (const Stmt& c : s->seq) visit(c);
        return;
    }
  }

  // Product of the extents of loops_[from..].
  double executions(size_t from) const {
    double p = 1;
    for (size_t l = from; l < loops_.size(); ++l) p *= loops_[l].extent;
    return p;
  }

  bool is_loop_var(const ir::ExprNode* v) const {
    for (const Loop& l : loops_) {
      if (l.var == v) return true;
    }
    return false;
  }

  Coeffs coeffs(const Expr& e) const {
    Coeffs out;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return out;
      case ExprKind::kVar: {
        auto it = lets_.find(e.get());
        if (it != lets_.end()) return it->second;
        if (is_loop_var(e.get())) out[e.get()] = 1;
        return out;  // a size variable: constant during the loop nest
      }
      case ExprKind::kAdd:
        out = coeffs(e->operands[0]);
        add_into(out, coeffs(e->operands[1]), 1);
        return out;
      case ExprKind::kSub:
        out = coeffs(e->operands[0]);
        add_into(out, coeffs(e->operands[1]), -1);
        return out;
      case ExprKind::kMul: {
        const Expr& a = e->operands[0];
        const Expr& b = e->operands[1];
        if (b->is_const_int()) {
          add_into(out, coeffs(a), static_cast<double>(b->int_value));
        } else if (a->is_const_int()) {
          add_into(out, coeffs(b), static_cast<double>(a->int_value));
        } else {
          out = coeffs(a);
          union_into(out, coeffs(b));
        }
        return out;
      }
      case ExprKind::kFloorDiv:
        if (e->operands[1]->is_const_int() && e->operands[1]->int_value != 0) {
          add_into(out, coeffs(e->operands[0]),
                   1.0 / static_cast<double>(e->operands[1]->int_value));
          return out;
        }
        return coeffs(e->operands[0]);
      case ExprKind::kFloorMod:
        return coeffs(e->operands[0]);
      default:
        for (const Expr& o : e->operands) union_into(out, coeffs(o));
        return out;
    }
  }

  // Distinct elements an access with coefficients `c` touches over loops_[from..].
  double unique_elements(const Coeffs& c, size_t from, double cap) const {
    double points = 1, span = 1;
    for (size_t l = from; l < loops_.size(); ++l) {
      auto it = c.find(loops_[l].var);
      if (it == c.end() || it->second == 0) continue;
      points *= loops_[l].extent;
      span += std::abs(it->second) * std::max(0.0, loops_[l].extent - 1);
    }
    return std::max(1.0, std::min({points, span, cap}));
  }

  void count_ops(const Expr& e, float* arith) const {
    ir::visit_expr(e, [&](const Expr& x) {
      const bool fl = ir::is_float(x->dtype);
      switch (x->kind) {
        case ExprKind::kAdd:
        case ExprKind::kSub:
          arith[fl ? 0 : 6] += 1;
          break;
        case ExprKind::kMul:
          arith[fl ? 1 : 6] += 1;
          break;
        case ExprKind::kDiv:
          arith[2] += 1;
          break;
        case ExprKind::kFloorDiv:
        case ExprKind::kFloorMod:
          arith[fl ? 2 : 7] += 1;
          break;
        case ExprKind::kMin:
        case ExprKind::kMax:
          arith[fl ? 3 : 6] += 1;
          break;
        case ExprKind::kEQ:
        case ExprKind::kNE:
        case ExprKind::kLT:
        case ExprKind::kLE:
        case ExprKind::kGT:
        case ExprKind::kGE:
          arith[ir::is_float(x->operands[0]->dtype) ? 3 : 8] += 1;
          break;
        case ExprKind::kAnd:
        case ExprKind::kOr:
        case ExprKind::kNot:
          arith[8] += 1;
          break;
        case ExprKind::kSelect:
          arith[5] += 1;
          break;
        case ExprKind::kCast:
          arith[9] += 1;
          break;
        case ExprKind::kCall:
          arith[4] += 1;
          break;
        default:
          break;
      }
    });
  }

  void add_row(const loop::StmtNode& st) {
    out_.values.resize(out_.values.size() + kNumFeatures, 0.0f);
    float* row = out_.values.data() + static_cast<size_t>(out_.num_rows) * kNumFeatures;
    ++out_.num_rows;
    const size_t depth = loops_.size();
    const double n_exec = executions(0);

    // ---- arithmetic ------------------------------------------------------------------------
    float per_exec[10] = {};
    count_ops(st.value, per_exec);
    count_ops(st.index, per_exec);
    for (int k = 0; k < 10; ++k) {
      row[kFeatureArith + k] = static_cast<float>(per_exec[k] * n_exec / work_);
    }
    const double flops_per_exec =
        per_exec[0] + per_exec[1] + per_exec[2] + per_exec[3] + per_exec[4];

    // ---- loop annotations --------------------------------------------------------------------
    const ForKind kinds[3] = {ForKind::kVectorized, ForKind::kUnrolled, ForKind::kParallel};
    for (int g = 0; g < 3; ++g) {
      float* f = row + kFeatureLoops + g * kLoopGroupSize;
      double num = 0, prod = 1, len = 0;
      int innermost = -1;
      for (size_t l = 0; l < depth; ++l) {
        if (loops_[l].kind != kinds[g]) continue;
        num += 1;
        prod *= loops_[l].extent;
        len = loops_[l].extent;
        innermost = static_cast<int>(l);
      }
      f[0] = static_cast<float>(num);
      f[1] = static_cast<float>(num > 0 ? prod : 0);
      f[2] = static_cast<float>(len);
      int pos = 0;  // none
      if (innermost >= 0) {
        pos = innermost + 1 == static_cast<int>(depth) ? 1 : innermost == 0 ? 3 : 2;
      }
      f[3 + pos] = 1;
    }

    // ---- buffers -----------------------------------------------------------------------------
    std::vector<BufferUse> uses;
    auto use_of = [&](const ir::BufferNode* b) -> BufferUse& {
      for (BufferUse& u : uses) {
        if (u.buffer == b) return u;
      }
      uses.push_back({b, 0, 0, {}});
      return uses.back();
    };
    auto add_loads = [&](const Expr& e) {
      ir::visit_expr(e, [&](const Expr& x) {
        if (x->kind != ExprKind::kLoad || !x->buffer) return;
        BufferUse& u = use_of(x->buffer.get());
        ++u.reads;
        union_into(u.coeffs, coeffs(x->operands[0]));
      });
    };
    add_loads(st.value);
    add_loads(st.index);
    {
      BufferUse& w = use_of(st.buffer.get());
      ++w.writes;
      union_into(w.coeffs, coeffs(st.index));
    }
    struct BufferStats {
      double bytes = 0;
      float f[kBufferFeatures] = {};
    };
    std::vector<BufferStats> stats;
    // Unique bytes of every buffer over loops_[from..] (reuse distances and intensity).
    auto unique_bytes_from = [&](size_t from) {
      double total = 0;
      for (const BufferUse& u : uses) {
        total += unique_elements(u.coeffs, from, buffer_elements(*u.buffer)) *
                 ir::dtype_bytes(u.buffer->dtype);
      }
      return total;
    };
    for (const BufferUse& u : uses) {
      BufferStats s;
      const double eb = ir::dtype_bytes(u.buffer->dtype);
      const double accesses = u.reads + u.writes;
      const double count = accesses * n_exec;
      const double unique = unique_elements(u.coeffs, 0, buffer_elements(*u.buffer));
      auto coeff_of = [&](size_t l) {
        auto it = u.coeffs.find(loops_[l].var);
        return it == u.coeffs.end() ? 0.0 : std::abs(it->second);
      };
      double lines = count, stride = 0, min_stride = 0;
      if (depth > 0) {
        const double inner = coeff_of(depth - 1);
        lines = inner == 0 ? count / std::max(1.0, loops_[depth - 1].extent)
                           : count * std::min(1.0, inner * eb / kLineBytes);
      }
      for (size_t l = depth; l-- > 0;) {
        const double c = coeff_of(l);
        if (c == 0) continue;
        if (stride == 0) stride = c;
        min_stride = min_stride == 0 ? c : std::min(min_stride, c);
      }
      const double unique_lines = std::max(
          1.0, unique * (min_stride > 0 ? std::min(1.0, min_stride * eb / kLineBytes) : 1));
      // Reuse: the innermost loop (of more than one iteration) the index does not depend on.
      int reuse_type = 2;  // none
      double reuse_ct = 0, dis_iter = 0, dis_bytes = 0;
      for (size_t l = depth; l-- > 0;) {
        if (loops_[l].extent <= 1 || coeff_of(l) != 0) continue;
        reuse_type = 0;
        reuse_ct = loops_[l].extent;
        dis_iter = executions(l + 1);
        dis_bytes = unique_bytes_from(l + 1);
        break;
      }
      if (reuse_type == 2 && accesses >= 2) {
        reuse_type = 1;
        reuse_ct = accesses - 1;
        dis_iter = 1;
        dis_bytes = unique_bytes_from(depth);
      }
      const int type = u.reads > 0 && u.writes > 0 ? 2 : u.writes > 0 ? 1 : 0;
      s.f[type] = 1;
      s.bytes = count * eb;
      s.f[3] = static_cast<float>(count * eb / work_);
      s.f[4] = static_cast<float>(unique * eb / work_);
      s.f[5] = static_cast<float>(lines / work_);
      s.f[6] = static_cast<float>(unique_lines / work_);
      s.f[7 + reuse_type] = 1;
      s.f[10] = static_cast<float>(dis_iter);
      s.f[11] = static_cast<float>(dis_bytes);
      s.f[12] = static_cast<float>(reuse_ct);
      const double div = std::max(1.0, reuse_ct) * work_;
      s.f[13] = static_cast<float>(count * eb / div);
      s.f[14] = static_cast<float>(unique * eb / div);
      s.f[15] = static_cast<float>(lines / div);
      s.f[16] = static_cast<float>(unique_lines / div);
      s.f[17] = static_cast<float>(stride);
      stats.push_back(s);
    }
    std::stable_sort(stats.begin(), stats.end(),
                     [](const BufferStats& a, const BufferStats& b) { return a.bytes > b.bytes; });
    for (size_t b = 0; b < stats.size() && b < static_cast<size_t>(kMaxBuffers); ++b) {
      std::copy(stats[b].f, stats[b].f + kBufferFeatures,
                row + kFeatureBuffers + b * kBufferFeatures);
    }

    // ---- arithmetic intensity at 10 cuts of the nest -----------------------------------------
    for (int k = 0; k < kIntensitySamples; ++k) {
      // k = 0: the innermost body alone; k = 9: the whole nest.
      const size_t inner_loops = static_cast<size_t>(
          std::lround(static_cast<double>(k) * depth / (kIntensitySamples - 1)));
      const size_t from = depth - std::min(depth, inner_loops);
      const double flops = flops_per_exec * executions(from);
      row[kFeatureIntensity + k] =
          static_cast<float>(flops / std::max(1.0, unique_bytes_from(from)));
    }

    // ---- allocation, scope, nest -------------------------------------------------------------
    for (auto it = allocs_.rbegin(); it != allocs_.rend(); ++it) {
      if (it->buffer != st.buffer.get()) continue;
      const double bytes = buffer_elements(*st.buffer) * ir::dtype_bytes(st.buffer->dtype);
      row[kFeatureAlloc + 0] = static_cast<float>(bytes);
      row[kFeatureAlloc + 1] = static_cast<float>(it->outer_prod / work_);
      row[kFeatureAlloc + 2] = static_cast<float>(n_exec / std::max(1.0, it->outer_prod));
      row[kFeatureAlloc + 3] = static_cast<float>(bytes * it->outer_prod / work_);
      break;
    }
    row[kFeatureScope + static_cast<int>(st.buffer->scope)] = 1;
    double unroll_prod = 1;
    for (const Loop& l : loops_) {
      if (l.kind == ForKind::kUnrolled) unroll_prod *= l.extent;
    }
    row[kFeatureMisc + 0] = static_cast<float>(n_exec / work_);
    row[kFeatureMisc + 1] = static_cast<float>(depth);
    row[kFeatureMisc + 2] = static_cast<float>(unroll_prod);
    row[kFeatureMisc + 3] = static_cast<float>(if_depth_);
  }

  const loop::LoweredFunc* func_ = nullptr;
  double work_ = 1;  // the task's size: totals are divided by it
  std::vector<Loop> loops_;
  std::unordered_map<const ir::ExprNode*, Coeffs> lets_;
  std::vector<Alloc> allocs_;
  int if_depth_ = 0;
  ProgramFeatures out_;
};

}  // namespace

ProgramFeatures extract_features(const loop::LoweredFunc& f, double work) {
  return Extractor().run(f, work);
}

void append_program_row(ProgramFeatures& f, double analytic_speedup) {
  f.values.resize(f.values.size() + kNumFeatures, 0.0f);
  float* row = f.values.data() + static_cast<size_t>(f.num_rows) * kNumFeatures;
  ++f.num_rows;
  row[kFeatureProgramRow] = 1.0f;
  row[kFeatureAnalyticSpeedup] = static_cast<float>(analytic_speedup);
}

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {"float_addsub", "float_mul", "float_div", "float_cmp",
                                  "float_math",   "select",    "int_arith", "int_divmod",
                                  "logic",        "cast"};
    for (const char* g : {"vec", "unroll", "parallel"}) {
      for (const char* k :
           {"num", "prod", "len", "pos_none", "pos_inner", "pos_middle", "pos_outer"}) {
        v.push_back(std::string(g) + "_" + k);
      }
    }
    const char* buf[kBufferFeatures] = {"read",
                                        "write",
                                        "read_write",
                                        "bytes",
                                        "unique_bytes",
                                        "lines",
                                        "unique_lines",
                                        "reuse_loop",
                                        "reuse_serial",
                                        "reuse_none",
                                        "reuse_dis_iter",
                                        "reuse_dis_bytes",
                                        "reuse_ct",
                                        "bytes_d_reuse",
                                        "unique_bytes_d_reuse",
                                        "lines_d_reuse",
                                        "unique_lines_d_reuse",
                                        "stride"};
    for (int b = 0; b < kMaxBuffers; ++b) {
      for (const char* k : buf) v.push_back("buf" + std::to_string(b) + "_" + k);
    }
    for (int k = 0; k < kIntensitySamples; ++k) v.push_back("intensity_" + std::to_string(k));
    for (const char* k :
         {"alloc_bytes", "alloc_outer_prod", "alloc_inner_prod", "alloc_prod", "scope_global",
          "scope_heap", "scope_stack", "scope_register", "outer_prod", "num_loops",
          "unroll_max_prod", "if_depth", "program_row", "analytic_speedup"}) {
      v.push_back(k);
    }
    TESSERA_CHECK(static_cast<int>(v.size()) == kNumFeatures)
        << "feature table has " << v.size() << " names for " << kNumFeatures << " features";
    return v;
  }();
  return names;
}

}  // namespace tessera::cost
