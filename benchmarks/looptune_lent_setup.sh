#!/usr/bin/env bash
# Prepare the lent machine (no Ray, no pydantic, a different llvmlite) to run optserve.kernels/policies/looptune_training code:
# our llvmlite 0.47 from .carry, an `optserve` namespace of symlinks, and a tiny stand-in for pydantic that
# only fills defaults (config validation is not exercised there). Source it from the repository root:
#   source benchmarks/looptune_lent_setup.sh
set -e
mkdir -p /tmp/site /tmp/ns/optserve /tmp/stub
# corpus/label_remote.sh may have unpacked it into .lent/ in an earlier call on this warm machine
# LLVMLITE=host: the machine's own llvmlite (kernel timings only; never for pass-list costs, which differ
# between LLVM versions), where the carried one does not fit the 64 MiB a call may carry
if [ "${LLVMLITE:-}" != host ] && [ ! -d /tmp/site/llvmlite ]; then
  if [ -f .lent/llvmlite047/.unpacked ]; then ln -sfn "$PWD/.lent/llvmlite047/llvmlite" /tmp/site/llvmlite
  else tar xJf .carry/llvmlite047.tar.xz -C /tmp/site; fi
fi
for f in optserve/*.py; do ln -sf "$PWD/$f" /tmp/ns/optserve/; done
for d in kernels policies looptune_training; do ln -sfn "$PWD/$d" /tmp/ns/optserve/$d; done
ln -sfn "$PWD/optserve/testing" /tmp/ns/optserve/testing  # the benchmarks' shared timing (commands.py)
cat > /tmp/stub/pydantic.py <<'PY'
class _Field:
    def __init__(self, default=None, default_factory=None):
        self.default, self.default_factory = default, default_factory


def Field(default=None, default_factory=None, **_):
    return _Field(default, default_factory)


def ConfigDict(**kwargs):
    return kwargs


class BaseModel:
    def __init__(self, **values):
        for cls in reversed(type(self).__mro__):
            for name, value in vars(cls).items():
                if isinstance(value, _Field):
                    default = value.default_factory() if value.default_factory else value.default
                    object.__setattr__(self, name, default)
        for name, value in values.items():
            object.__setattr__(self, name, value)


SecretStr = str


class ValidationError(ValueError):
    pass
PY
cat > /tmp/stub/pydantic_settings.py <<'PY'
from pydantic import BaseModel, ConfigDict


class BaseSettings(BaseModel):
    pass


class PydanticBaseSettingsSource:
    def __init__(self, *args, **kwargs):
        pass


EnvSettingsSource = PydanticBaseSettingsSource
SettingsConfigDict = ConfigDict
PY
export PYTHONPATH=/tmp/site:/tmp/ns:/tmp/stub
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
set +e
