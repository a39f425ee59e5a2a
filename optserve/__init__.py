"""optserve: a model-serving microservice for compiler heuristics.

The top-level folders of the repository are its subpackages: ``optserve.compiler`` (compiler/),
``optserve.engine`` (engine/), ``optserve.kernels`` (kernels/), ``optserve.policies`` (policies/),
``optserve.serve`` (serve/), ``optserve.clients`` (clients/), ``optserve.corpus`` (corpus/) and
``optserve.passlm`` (passlm/).
This package holds the glue: configuration, the CLI and the served strategy names (`strategies`).
"""

__version__ = "0.1.0"
