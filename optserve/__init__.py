"""optserve: a model-serving microservice for compiler heuristics.

The top-level folders of the repository are its subpackages: ``optserve.compiler`` (compiler/),
``optserve.engine`` (engine/), ``optserve.kernels`` (kernels/), ``optserve.policies`` (policies/),
``optserve.serve`` (serve/), ``optserve.clients`` (clients/), ``optserve.corpus`` (corpus/) and
``optserve.passlm`` (passlm/).
This package holds the glue: configuration, the CLI, the served strategy names (`strategies`), the
objective names (`objectives`), the request's deadline (`deadline`) and LLVM's host target, set up once for
the compiler and the kernels (`llvm_targets`).
"""

__version__ = "0.1.0"
