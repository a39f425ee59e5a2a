"""Fuzzing the IR intake: structure-aware mutations of real bitcode and IR text, the targets they are
checked against, and each input checked in a forked child so that a crash or hang of LLVM is an outcome."""
