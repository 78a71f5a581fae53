#include "schedule/gpu/gpu_program.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/functor.h"
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/gpu/tiled_reduction.h"
#include "schedule/stage_plan.h"
#include "util/check.h"

namespace tessera::schedule::gpu {

namespace {

using ir::Expr;
using ir::ExprKind;
using ir::Tensor;
using ir::TensorNode;

// Copies of a DAG cut at some of its tensors: a read of a cut tensor becomes a read of the
// placeholder standing for it (same indices), so the part above the cut is a kernel of its own.
// Tensors below no cut are returned as they are.
class CutDag {
 public:
  explicit CutDag(const std::map<const TensorNode*, Tensor>& cuts) : cuts_(cuts) {}

  Tensor operator()(const Tensor& t) {
    auto cut = cuts_.find(t.get());
    if (cut != cuts_.end()) return cut->second;
    if (t->is_placeholder()) return t;
    auto done = rebuilt_.find(t.get());
    if (done != rebuilt_.end()) return done->second;
    bool changed = false;
    for (const Tensor& in : ir::direct_inputs(t)) changed |= (*this)(in).get() != in.get();
    Tensor out = t;
    if (changed) {
      Retarget retarget(*this);
      out = ir::with_definition(t, t->op->axes, t->op->reduce_axes, retarget.mutate(t->op->body));
    }
    rebuilt_[t.get()] = out;
    return out;
  }

 private:
  class Retarget : public ir::ExprMutator {
   public:
    explicit Retarget(CutDag& cut) : cut_(cut) {}
    Expr mutate(const Expr& e) override {
      Expr m = mutate_children(e);
      if (m->kind != ExprKind::kAccess) return m;
      return ir::access(cut_(m->tensor), m->operands);
    }

   private:
    CutDag& cut_;
  };

  const std::map<const TensorNode*, Tensor>& cuts_;
  std::map<const TensorNode*, Tensor> rebuilt_;
};

// The materialised tensors a stage reads (after inlining).
std::set<const TensorNode*> stage_reads(const Stage& s, const StagePlan& plan) {
  std::set<const TensorNode*> reads;
  auto collect = [&](const Tensor& t) {
    ir::visit_expr(inline_body(t, plan.inlined), [&](const Expr& e) {
      if (e->kind == ExprKind::kAccess) reads.insert(e->tensor.get());
    });
  };
  collect(s.op);
  if (s.epilogue) collect(s.epilogue);
  return reads;
}

class ProgramBuilder {
 public:
  ProgramBuilder(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                 const std::string& name)
      : name_(name), plan_(plan_stages(outputs, inputs, gpu_plan_choices())) {
    program_.inputs = inputs;
    program_.outputs = outputs;
    TESSERA_CHECK(plan_.outputs.size() == outputs.size())
        << "GPU program: the plan of " << name << " changed its output count";
    // The plan's outputs may be rewritten nodes (long sums split): the same ABI positions.
    for (size_t i = 0; i < inputs.size(); ++i) index_[inputs[i].get()] = static_cast<int>(i);
    for (size_t o = 0; o < plan_.outputs.size(); ++o) {
      index_[plan_.outputs[o].get()] = static_cast<int>(inputs.size() + o);
    }
    for (const Stage& s : plan_.stages) reads_.push_back(stage_reads(s, plan_));
  }

  GpuProgram build() {
    const size_t n = plan_.stages.size();
    TESSERA_CHECK(n > 0) << "GPU program: " << name_ << " has no stages";
    for (size_t first = 0; first < n;) {
      // A matmul or conv (a reduction sharing two operands across threads) is not folded into
      // a row kernel, which would run it without operand reuse: its run must be tiled too.
      const bool tiled_alone = shares_two_operands_alone(first);
      size_t last = n;  // one past the run's last stage
      for (; last > first; --last) {
        try {
          add_launch(first, last, tiled_alone);
          break;
        } catch (const Error& e) {
          if (last == first + 1) {
            TESSERA_FAIL() << "GPU program: stage " << plan_.stages[first].written()->name << " of "
                           << name_ << " has no GPU schedule: " << e.what();
          }
        }
      }
      first = last;
    }
    return std::move(program_);
  }

 private:
  // Whether stage `first` alone is a tiled reduction sharing two operands (planned, not
  // lowered).
  bool shares_two_operands_alone(size_t first) {
    CutDag cut(cuts_);
    const Tensor out = cut(plan_.stages[first].written());
    const StagePlan alone =
        plan_stages({out}, ir::collect_dag({out}).placeholders, gpu_plan_choices());
    return gpu_schedule_name(alone) == "tiled" && reused_operands(alone) >= 2;
  }

  // Stages [first, last) as one launch; throws (changing nothing) when no schedule covers them
  // or, with `must_tile`, when they are not one tiled reduction.
  void add_launch(size_t first, size_t last, bool must_tile) {
    // Written here and read by a later run (or a program output): the launch's outputs.
    std::vector<Tensor> written;
    for (size_t i = first; i < last; ++i) {
      const Tensor& t = plan_.stages[i].written();
      bool needed = is_program_output(t);
      for (size_t j = last; j < plan_.stages.size() && !needed; ++j) {
        needed = reads_[j].count(t.get()) > 0;
      }
      if (needed) written.push_back(t);
    }
    TESSERA_CHECK(!written.empty()) << "GPU program: a run of " << name_ << " writes nothing";
    CutDag cut(cuts_);
    std::vector<Tensor> outs;
    for (const Tensor& t : written) outs.push_back(cut(t));
    const ir::TensorDAG dag = ir::collect_dag(outs);
    std::vector<Tensor> ins;
    std::vector<int> buffers;
    for (const Tensor& p : dag.placeholders) {
      ins.push_back(p);
      buffers.push_back(buffer_of(p));
    }
    const StagePlan plan = plan_stages(outs, ins, gpu_plan_choices());
    TESSERA_CHECK(!must_tile || gpu_schedule_name(plan) == "tiled")
        << "GPU program: the run is not one tiled reduction";
    const std::string launch_name =
        first == 0 && last == plan_.stages.size() ? name_ : name_ + "_" + std::to_string(first);
    GpuLaunch launch{lower_gpu(plan, launch_name), gpu_schedule_name(plan), {}};
    // Commit: written temporaries get buffers, and everything written (outputs too) stands cut
    // for later runs, which read it from its buffer.
    for (const Tensor& t : written) {
      if (!index_.count(t.get())) {
        index_[t.get()] = static_cast<int>(program_.inputs.size() + program_.outputs.size() +
                                           program_.temporaries.size());
        program_.temporaries.push_back(t);
      }
      cuts_[t.get()] = ir::placeholder(t->name, t->shape, t->dtype);
      cut_origin_[cuts_[t.get()].get()] = t.get();
    }
    for (const Tensor& t : written) buffers.push_back(index_.at(t.get()));
    launch.buffers = std::move(buffers);
    program_.launches.push_back(std::move(launch));
  }

  bool is_program_output(const Tensor& t) const {
    for (const Tensor& o : plan_.outputs) {
      if (o.get() == t.get()) return true;
    }
    return false;
  }

  int buffer_of(const Tensor& placeholder) const {
    auto origin = cut_origin_.find(placeholder.get());
    const TensorNode* key = origin != cut_origin_.end() ? origin->second : placeholder.get();
    auto it = index_.find(key);
    TESSERA_CHECK(it != index_.end())
        << "GPU program: " << name_ << " reads " << placeholder->name << ", not an input";
    return it->second;
  }

  std::string name_;
  StagePlan plan_;
  GpuProgram program_;
  std::vector<std::set<const TensorNode*>> reads_;  // per stage
  std::map<const TensorNode*, int> index_;          // buffer of an input, output or temporary
  std::map<const TensorNode*, Tensor> cuts_;        // temporary -> its placeholder
  std::map<const TensorNode*, const TensorNode*> cut_origin_;  // placeholder -> temporary
};

}  // namespace

std::vector<ir::Tensor> GpuProgram::buffers() const {
  std::vector<ir::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  all.insert(all.end(), temporaries.begin(), temporaries.end());
  return all;
}

std::string GpuProgram::schedule() const {
  std::string s;
  for (const GpuLaunch& l : launches) s += (s.empty() ? "" : "+") + l.schedule;
  return s;
}

GpuProgram lower_gpu_program(const std::vector<ir::Tensor>& outputs,
                             const std::vector<ir::Tensor>& inputs, const std::string& name) {
  return ProgramBuilder(outputs, inputs, name).build();
}

}  // namespace tessera::schedule::gpu
