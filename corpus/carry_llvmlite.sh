#!/usr/bin/env bash
# Pack our llvmlite 0.47 (LLVM 20.1.8, the service's compiler) for the lent machine: .carry/llvmlite047.tar.xz.
# The shared library is stripped of its static symbol table (ctypes needs only the dynamic symbols): 34.5 MB
# instead of 38 MB packed, which leaves room beside it in a call's 64 MiB for a bundle of a few MB.
# Usage, in the repository root here: bash corpus/carry_llvmlite.sh [VENV]   (default .venv)
set -euo pipefail
venv=${1:-.venv}
site=$("$venv/bin/python" -c 'import llvmlite, os; print(os.path.dirname(os.path.dirname(llvmlite.__file__)))')
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -r "$site/llvmlite" "$stage/"
rm -rf "$stage/llvmlite/tests"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
strip --strip-unneeded "$stage/llvmlite/binding/libllvmlite.so"
mkdir -p .carry
tar -cf - -C "$stage" llvmlite | xz -9e -T2 > .carry/llvmlite047.tar.xz.partial
mv .carry/llvmlite047.tar.xz.partial .carry/llvmlite047.tar.xz
ls -l .carry/llvmlite047.tar.xz
