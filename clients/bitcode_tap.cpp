// optcc's bitcode tap: an LLVM pass plugin that writes the module, as it enters clang's optimization
// pipeline, as bitcode to the file descriptor named by OPTCC_BITCODE_FD, and closes it. Loaded into clang's
// one-step compile (`clang -fpass-plugin=tap.so -Oz -c unit.c`), it gives optcc the unit's unoptimized
// bitcode (byte for byte what `-Xclang -disable-llvm-passes -emit-llvm` writes: use-list order kept) while
// clang goes on to its own object, which the tap leaves untouched: one clang process instead of two
// (clients/bitcode_tap.py builds it for the installed LLVM; clients/compile_modes.py reads the descriptor).
#include "llvm/ADT/Any.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace llvm;

namespace {

// Writes `module` to OPTCC_BITCODE_FD once per process (the variable is cleared), and closes it.
void writeOnce(const Module &module) {
  const char *fd_text = std::getenv("OPTCC_BITCODE_FD");
  if (fd_text == nullptr || *fd_text == '\0')
    return;
  char *end = nullptr;
  long fd = std::strtol(fd_text, &end, 10);
  unsetenv("OPTCC_BITCODE_FD");
  if (*end != '\0' || fd < 3)
    return;
  raw_fd_ostream out(static_cast<int>(fd), /*shouldClose=*/true);
  WriteBitcodeToFile(module, out, /*ShouldPreserveUseListOrder=*/true);
}

// Before the pipeline's first pass, clang's own passes at its start (assignment tracking with -g) included:
// a pass instrumentation callback, which runs ahead of every pass, not a pass added at the pipeline's start.
void registerTap(PassBuilder &builder) {
  PassInstrumentationCallbacks *callbacks = builder.getPassInstrumentationCallbacks();
  if (callbacks == nullptr)
    return;
  callbacks->registerBeforeNonSkippedPassCallback([](StringRef, Any ir) {
    if (const auto *module = any_cast<const Module *>(&ir))
      writeOnce(**module);
  });
}

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "optcc-bitcode-tap", "2", registerTap};
}
