"""Build hook: the gRPC stubs are generated from proto/ while the package is built (never committed).

A wheel gets them in its build folder; an editable install (`make test`, `make serve`) in optserve/v1/ of
the source tree, as `make proto` does. Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PROTO_ROOT = Path(__file__).resolve().parent / "proto"
PROTO = "optserve/v1/optserve.proto"


def generate_grpc_stubs(out_dir: Path) -> None:
    """optserve_pb2.py, optserve_pb2_grpc.py and optserve_pb2.pyi under `out_dir`/optserve/v1/."""
    from grpc_tools import protoc

    outputs = [f"--{kind}_out={out_dir}" for kind in ("python", "grpc_python", "pyi")]
    if protoc.main(["protoc", f"-I{PROTO_ROOT}", *outputs, str(PROTO_ROOT / PROTO)]) != 0:
        raise RuntimeError(f"protoc could not compile {PROTO_ROOT / PROTO}")


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        generate_grpc_stubs(Path(__file__).resolve().parent if self.editable_mode else Path(self.build_lib))


setup(cmdclass={"build_py": BuildPyWithStubs})
