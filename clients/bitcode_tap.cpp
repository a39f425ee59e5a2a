// optcc's bitcode tap: an LLVM pass plugin that writes the module, as it enters clang's optimization
// pipeline, as bitcode to the file descriptor named by OPTCC_BITCODE_FD, and closes it. Loaded into clang's
// one-step compile (`clang -fpass-plugin=tap.so -Oz -c unit.c`), it gives optcc the unit's unoptimized
// bitcode (byte for byte what `-Xclang -disable-llvm-passes -emit-llvm` writes: use-list order kept) while
// clang goes on to its own object, which the tap leaves untouched: one clang process instead of two
// (clients/bitcode_tap.py builds it for the installed LLVM; clients/compile_modes.py reads the descriptor).
//
// The gate: with OPTCC_GATE_FD too (a socket), clang then waits for optcc's word on that descriptor, which
// optcc gives once it has compared the service's object with the record of clang's object of this very
// bitcode (clients/baseline_memo.py). 'c', the descriptor's end (optcc gone) or an error: clang goes on to
// its own object as without the gate. 's': the service's object is the unit's, so clang's -Oz pipeline and
// code generator need not run: the tap empties the module, and clang finishes its compile on nothing (2-3
// ms) rather than exiting at once, so that what it writes after its back end, the -MD dependency file, is
// still written, and its exit status stays its own; on its way out (exit's handlers, its files written and
// closed) it sends optcc that status as one byte, so that optcc need not wait for the process to be torn
// down. The front end's errors stop clang before the pipeline, so before the gate: a unit with an error
// fails exactly as clang fails it.
#include "llvm/ADT/Any.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <sys/socket.h>
#include <unistd.h>

using namespace llvm;

namespace {

// The descriptor named by the environment variable `name` (cleared: once per process), or -1.
int takeDescriptor(const char *name) {
  const char *text = std::getenv(name);
  if (text == nullptr || *text == '\0')
    return -1;
  char *end = nullptr;
  long fd = std::strtol(text, &end, 10);
  unsetenv(name);
  if (*end != '\0' || fd < 3)
    return -1;
  return static_cast<int>(fd);
}

// optcc's word at the gate: whether clang is to stop ('s'); anything else, the end or an error go on (and
// close the gate).
bool toldToStop(int gate) {
  char word = 'c';
  ssize_t got;
  do
    got = read(gate, &word, 1);
  while (got < 0 && errno == EINTR);
  bool stop = got == 1 && word == 's';
  if (!stop)
    close(gate);
  return stop;
}

// exit's handler after the word to stop: clang's exit status, one byte, to optcc (gone: no signal).
void reportStatus(int status, void *gate) {
  char byte = static_cast<char>(status & 0xff);
  int fd = static_cast<int>(reinterpret_cast<intptr_t>(gate));
  (void)!send(fd, &byte, 1, MSG_NOSIGNAL);
  close(fd);
}

// Nothing left for clang's pipeline and code generator: no functions, variables, aliases or module asm.
void empty(Module &module) {
  module.dropAllReferences();
  while (!module.alias_empty())
    module.alias_begin()->eraseFromParent();
  while (!module.ifunc_empty())
    module.ifunc_begin()->eraseFromParent();
  while (!module.empty())
    module.begin()->eraseFromParent();
  while (!module.global_empty())
    module.global_begin()->eraseFromParent();
  module.setModuleInlineAsm("");
}

// Writes `module` to OPTCC_BITCODE_FD once per process and closes it; then the gate, if there is one.
void writeOnce(const Module &module) {
  int fd = takeDescriptor("OPTCC_BITCODE_FD");
  if (fd < 0)
    return;
  {
    raw_fd_ostream out(fd, /*shouldClose=*/true);
    WriteBitcodeToFile(module, out, /*ShouldPreserveUseListOrder=*/true);
  }
  int gate = takeDescriptor("OPTCC_GATE_FD");
  if (gate >= 0 && toldToStop(gate)) {
    empty(const_cast<Module &>(module));  // before the pipeline's first pass: nothing has read it yet
    if (on_exit(reportStatus, reinterpret_cast<void *>(static_cast<intptr_t>(gate))) != 0)
      close(gate);  // no report: optcc waits for the process's end
  }
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
  return {LLVM_PLUGIN_API_VERSION, "optcc-bitcode-tap", "3", registerTap};
}
