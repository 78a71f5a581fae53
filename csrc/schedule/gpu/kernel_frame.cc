#include "schedule/gpu/kernel_frame.h"

#include "loop/pipeline.h"

namespace tessera::schedule::gpu {

void bind_plan_args(const StagePlan& plan, loop::LoweredFunc* f, AccessLowering* al) {
  for (const std::vector<ir::Tensor>* ts : {&plan.inputs, &plan.outputs}) {
    for (const ir::Tensor& t : *ts) {
      f->args.push_back(ir::make_buffer(t->name, t->dtype, t->shape));
      al->bind(t.get(), f->args.back());
    }
  }
}

loop::LoweredFunc finish_launch(loop::LoweredFunc f, const StagePlan& plan, const ir::Var& bx,
                                const ir::Expr& blocks, const ir::Var& tx, int64_t threads,
                                loop::Stmt thread_body) {
  const loop::Stmt block = loop::make_for(tx, ir::int_imm(0), ir::int_imm(threads),
                                          loop::ForKind::kGpuThreadX, std::move(thread_body));
  f.body = loop::make_for(bx, ir::int_imm(0), blocks, loop::ForKind::kGpuBlockX, block);
  f.size_vars = ir::collect_dag(plan.outputs).size_vars;
  return loop::run_loop_passes(std::move(f));
}

}  // namespace tessera::schedule::gpu
