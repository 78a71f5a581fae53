#include "codegen/llvm/jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>

#include <mutex>

#include "codegen/llvm/host_cpu.h"
#include "codegen/llvm/runtime_symbols.h"
#include "util/check.h"

namespace tessera::codegen {

namespace {

std::string error_text(llvm::Error err) { return llvm::toString(std::move(err)); }

void init_llvm_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

llvm::orc::LLJIT* create_jit() {
  init_llvm_targets();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  TESSERA_CHECK(static_cast<bool>(jtmb))
      << "LLVM cannot target this host: " << error_text(jtmb.takeError());
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  TESSERA_CHECK(static_cast<bool>(jit))
      << "cannot create the LLVM JIT: " << error_text(jit.takeError());
  llvm::orc::LLJIT& j = **jit;
  llvm::orc::JITDylib& jd = j.getMainJITDylib();

  // Runtime entry points by absolute address: they live in tessera_core, which may be inside a
  // Python extension whose symbols the dynamic loader does not export globally.
  llvm::orc::SymbolMap symbols;
  int count = 0;
  const RuntimeSymbol* table = runtime_symbols(&count);
  for (int i = 0; i < count; ++i) {
    symbols[j.mangleAndIntern(table[i].name)] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(table[i].address),
                                 llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  }
  llvm::Error err = jd.define(llvm::orc::absoluteSymbols(std::move(symbols)));
  TESSERA_CHECK(!err) << "cannot register runtime symbols: " << error_text(std::move(err));

  // Anything else LLVM may introduce (e.g. compiler-rt style helpers) comes from the process.
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      j.getDataLayout().getGlobalPrefix());
  TESSERA_CHECK(static_cast<bool>(gen)) << error_text(gen.takeError());
  jd.addGenerator(std::move(*gen));
  // Deliberately leaked: kernels held in static objects may be destroyed after a function-local
  // static JIT would be, and unloading them then must still find a live JIT.
  return jit->release();
}

llvm::orc::LLJIT& the_jit() {
  static llvm::orc::LLJIT* jit = create_jit();
  return *jit;
}

}  // namespace

std::unique_ptr<llvm::TargetMachine> create_host_target_machine(int opt_level) {
  init_llvm_targets();
  const HostCpu& cpu = host_cpu();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(cpu.triple, err);
  TESSERA_CHECK(target != nullptr) << "no LLVM target for " << cpu.triple << ": " << err;
  llvm::TargetOptions options;
  // Fuse a*b+c into FMA where the IR allows contraction; no other fast-math relaxations.
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  // Assembly listings (CompileOptions::keep_asm) carry comments such as "Spill"/"Reload" that
  // tests and people use to check register allocation; object code is unaffected.
  options.MCOptions.AsmVerbose = true;
  llvm::CodeGenOpt::Level level = opt_level >= 3   ? llvm::CodeGenOpt::Aggressive
                                  : opt_level == 2 ? llvm::CodeGenOpt::Default
                                  : opt_level == 1 ? llvm::CodeGenOpt::Less
                                                   : llvm::CodeGenOpt::None;
  // Large code model: JIT sections and the runtime functions can be more than 2 GiB apart, and
  // RuntimeDyld cannot relocate 32-bit PC-relative references across that distance.
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(cpu.triple, cpu.name, cpu.features, options, llvm::Reloc::Static,
                                  llvm::CodeModel::Large, level, /*JIT=*/true));
  TESSERA_CHECK(tm != nullptr) << "cannot create an LLVM TargetMachine for " << cpu.name;
  return tm;
}

LoadedObject::~LoadedObject() {
  if (!tracker_) return;
  if (llvm::Error err = tracker_->remove()) {
    // Destructors must not throw; a failed unload only leaks the code.
    llvm::consumeError(std::move(err));
  }
}

uint64_t LoadedObject::lookup(const std::string& symbol) const {
  llvm::orc::LLJIT& jit = the_jit();
  auto sym = jit.lookup(symbol);
  TESSERA_CHECK(static_cast<bool>(sym))
      << "JIT symbol " << symbol << " not found: " << error_text(sym.takeError());
  return sym->getAddress();
}

std::unique_ptr<LoadedObject> jit_load_object(std::unique_ptr<llvm::MemoryBuffer> object) {
  llvm::orc::LLJIT& jit = the_jit();
  llvm::orc::ResourceTrackerSP rt = jit.getMainJITDylib().createResourceTracker();
  llvm::Error err = jit.addObjectFile(rt, std::move(object));
  TESSERA_CHECK(!err) << "cannot add a kernel object to the JIT: " << error_text(std::move(err));
  return std::make_unique<LoadedObject>(std::move(rt));
}

}  // namespace tessera::codegen
