"""optserve: a model-serving microservice for compiler heuristics.

The top-level folders of the repository are the subpackages: ``optserve.compiler`` (compiler/),
``optserve.engine`` (engine/), ``optserve.kernels`` (kernels/), ``optserve.policies`` (policies/),
``optserve.serve`` (serve/) and ``optserve.corpus`` (corpus/). This package holds the glue: configuration and CLI.
"""

__version__ = "0.1.0"
