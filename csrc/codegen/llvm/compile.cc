#include "codegen/llvm/compile.h"

#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <atomic>
#include <chrono>

#include "codegen/llvm/codegen.h"
#include "codegen/llvm/jit.h"
#include "loop/pipeline.h"
#include "loop/scalar_loops.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::codegen {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Kernel names become C identifiers, unique per process (the JIT has one symbol namespace and a
// name may be compiled many times, e.g. while tuning).
std::string unique_symbol(const std::string& name) {
  static std::atomic<uint64_t> counter{0};
  std::string s = "tessera_";
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    s += ok ? c : '_';
  }
  return s + "_" + std::to_string(counter.fetch_add(1));
}

void optimize(llvm::Module& m, llvm::TargetMachine* tm, int opt_level, bool loop_passes) {
  if (opt_level <= 0) return;
  // Declared in this order so they are destroyed in the right order (they reference each other).
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // Tessera vectorises and unrolls in loop IR (loop/legalize_vectorize.h, loop/unroll.h). Where
  // it did so everywhere, LLVM's loop and SLP vectorisers and its unroller only add
  // runtime-checked copies and remainder loops of code already in its final shape, and cost
  // more than half the JIT time; scalar loops the schedule left (loop/scalar_loops.h) still get
  // them, since they can run several times faster vectorised.
  llvm::PipelineTuningOptions pto;
  if (!loop_passes) {
    pto.LoopVectorization = false;
    pto.SLPVectorization = false;
    pto.LoopUnrolling = false;
    pto.LoopInterleaving = false;
  }
  llvm::PassBuilder pb(tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = opt_level >= 3   ? llvm::OptimizationLevel::O3
                                  : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                   : llvm::OptimizationLevel::O1;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  mpm.run(m, mam);
}

void emit_machine_code(llvm::Module& m, llvm::TargetMachine* tm, llvm::raw_pwrite_stream& os,
                       llvm::CodeGenFileType type) {
  llvm::legacy::PassManager pm;
  TESSERA_CHECK(!tm->addPassesToEmitFile(pm, os, nullptr, type))
      << "the LLVM target cannot emit machine code";
  pm.run(m);
}

std::string module_text(const llvm::Module& m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  os.flush();
  return s;
}

}  // namespace

namespace {
std::atomic<int64_t> live_compiled_kernels{0};
}  // namespace

CompiledKernel::CompiledKernel() { live_compiled_kernels.fetch_add(1); }
CompiledKernel::~CompiledKernel() { live_compiled_kernels.fetch_sub(1); }

int64_t live_kernels() { return live_compiled_kernels.load(); }

std::shared_ptr<CompiledKernel> compile_cpu(const loop::LoweredFunc& f,
                                            const CompileOptions& options) {
  util::bump(util::Counter::kJitCompiles);
  Clock::time_point t0 = Clock::now();
  std::shared_ptr<CompiledKernel> k(new CompiledKernel());
  k->func_ = f.cpu_ready ? f : loop::prepare_for_cpu(f);
  k->symbol_ = unique_symbol(f.name);
  bool want_ir = options.dump_ir || options.keep_ir;
  bool want_asm = options.dump_ir || options.keep_asm;

  llvm::LLVMContext ctx;
  // Value names only matter to people reading the IR; skipping them saves time.
  ctx.setDiscardValueNames(!want_ir);
  std::unique_ptr<llvm::TargetMachine> tm = create_host_target_machine(options.opt_level);
  llvm::Module module(k->symbol_, ctx);
  module.setDataLayout(tm->createDataLayout());
  module.setTargetTriple(tm->getTargetTriple().str());
  k->notes_ = k->func_.notes;
  for (std::string& note : build_llvm_module(k->func_, k->symbol_, module)) {
    k->notes_.push_back(std::move(note));
  }
  Clock::time_point t1 = Clock::now();
  k->times_.ir_gen_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();

  optimize(module, tm.get(), options.opt_level, loop::has_scalar_inner_loops(k->func_));
  Clock::time_point t2 = Clock::now();
  k->times_.opt_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();

  if (want_ir) k->llvm_ir_ = module_text(module);
  if (want_asm) {
    // Code generation rewrites the module it runs on, so the listing comes from a copy.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
    llvm::SmallVector<char, 0> text;
    llvm::raw_svector_ostream os(text);
    emit_machine_code(*copy, tm.get(), os, llvm::CGFT_AssemblyFile);
    k->assembly_.assign(text.begin(), text.end());
  }
  if (options.dump_ir) {
    for (const std::string& note : k->notes_) llvm::errs() << "; note: " << note << "\n";
    llvm::errs() << "; ---- tessera kernel " << f.name << " (" << k->symbol_ << "): optimised IR\n"
                 << k->llvm_ir_ << "; ---- assembly\n"
                 << k->assembly_ << "\n";
  }
  Clock::time_point t3 = Clock::now();
  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    emit_machine_code(module, tm.get(), os, llvm::CGFT_ObjectFile);
  }
  Clock::time_point t4 = Clock::now();
  k->times_.codegen_ms = std::chrono::duration<double, std::milli>(t4 - t3).count();

  k->code_bytes_ = object.size();
  k->code_ = jit_load_object(
      std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(object), k->symbol_, false));
  k->fn_ = reinterpret_cast<CompiledKernel::Fn>(k->code_->lookup(k->symbol_));
  k->times_.link_ms = ms_since(t4);
  // Total excludes the optional IR/assembly listings (t2..t3), which are debugging aids.
  k->times_.total_ms = ms_since(t0) - std::chrono::duration<double, std::milli>(t3 - t2).count();
  return k;
}

}  // namespace tessera::codegen
