"""optcc's settings, read from OPTCC_* environment variables (the list is in optcc.py's docstring).

Kept apart from the compile machinery (takeover.py) so that a command optcc passes through imports nothing
but this, command_line.py and the standard library's lightest modules.
"""

from __future__ import annotations

import os
from collections import namedtuple

from optserve.objectives import OBJECTIVE_NAMES, Objective
from optserve.strategies import ServedStrategy

STRATEGIES = tuple(strategy.value for strategy in ServedStrategy)
LEVELS = {"s": "-Os", "z": "-Oz", "os": "-Os", "oz": "-Oz", "-os": "-Os", "-oz": "-Oz"}
# The unoptimized IR sent to the service. `oz` is what clang itself starts its -Oz (or -Os) pipeline from
# (functions carry minsize/optsize and no noinline; TBAA and lifetime markers present), so the service's
# -Oz floor is about clang's. `o0` is the thesis' model input (-O0 without optnone): every function stays
# `noinline` and lacks the size attributes, so its -Oz is ~25% larger .text than clang -Oz
# (docs/bench/clients.md), and clang's object then wins nearly every unit.
IR_MODES = {
    "oz": ("-Xclang", "-disable-llvm-passes", "-emit-llvm"),  # after the unit's own size level
    "o0": ("-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm"),
}


def ir_step_flags(ir_mode: str, level: str) -> tuple[str, ...]:
    """The flags that make clang write the unit's unoptimized bitcode for `level` (-Os/-Oz)."""
    return IR_MODES[ir_mode] if ir_mode == "o0" else (level, *IR_MODES[ir_mode])


# A unit whose bitcode is larger than OPTCC_LARGE_UNIT is about as long as the model's context or longer: the
# service would decode lists for several of its functions (each a model call on the service's CPUs) before it
# compiles one. Within a build's budget the coreset's first lists are the cheaper candidates for such units.
LARGE_UNIT_STRATEGY = ServedStrategy.CORESET.value
LARGE_UNIT_LISTS = 4


class ConfigError(ValueError):
    """An OPTCC_* variable has a value optcc cannot use."""


class Policy(namedtuple("Policy", "default_level force")):
    """Which units optcc takes over beyond effective -Os/-Oz (OPTCC_DEFAULT_LEVEL, OPTCC_FORCE)."""

    __slots__ = ()

    @classmethod
    def from_environment(cls, env: dict[str, str]) -> Policy:
        level = env.get("OPTCC_DEFAULT_LEVEL", "").strip().lower()
        if level and level not in LEVELS:
            raise ConfigError(f"OPTCC_DEFAULT_LEVEL={level!r} is not s or z")
        return cls(LEVELS[level] if level else None, env.get("OPTCC_FORCE", "") not in ("", "0"))


# One namedtuple, not a dataclass: the compile path's start (command_line.py says why).
# budget: the service call's time per unit as a multiple of its front end's; 0: OPTCC_DEADLINE, all sent.
#   With a budget clang's own compile runs first, and a unit whose compile is shorter than the front end
#   a call needs (compile_modes.front_end_needed_s) is not sent
# budget_min_s: a unit whose deadline would be shorter is not sent (clang's object)
# call_overhead_s: what a call costs beyond its deadline: taken off the budget
# large_unit_bytes: bitcode above this goes with strategy coreset (LARGE_UNIT_LISTS lists); 0: never
# cache_dir: optcc's object cache (object_cache.py); None: off (OPTCC_CACHE=0)
# cache_max_bytes: its size limit (OPTCC_CACHE_SIZE); 0: none
# recache: OPTCC_RECACHE: skip lookups, store each unit's new outcome (ccache's recache)
# clang_baseline: OPTCC_CLANG_BASELINE: wait for clang's object, send its .text size
# baselines_dir: clang's objects' records (baseline_memo.py); None: off
# tap_dir: the bitcode taps' folder (bitcode_tap.py); None: off (OPTCC_TAP=0)
_OptccSettings = namedtuple(
    "OptccSettings",
    "server objective ir_mode strategy samples deadline_s budget budget_min_s call_overhead_s"
    " large_unit_bytes retry_s clang log_path verbose cache_dir cache_max_bytes recache clang_baseline"
    " baselines_dir tap_dir",
    defaults=(0, False, False, None, None),
)


class OptccSettings(_OptccSettings):
    """optcc's settings for one unit, from OPTCC_* (`from_environment`)."""

    __slots__ = ()

    @property
    def stored(self) -> bool:
        """Strategy `stored` (the default): every unit asks the service for what the tuning store holds
        (about one compile there, beside clang's back end: no time budget gates it), and is recorded there
        for `optserve tune`; the deep search of the other strategies is for tuning, off the build's path."""
        return self.strategy == ServedStrategy.STORED

    @property
    def sends_clang_baseline(self) -> bool:
        """Whether the service is asked after clang's compile and given its object's `.text` bytes as the
        baseline to beat (`baseline_cost`): only when OPTCC_CLANG_BASELINE asks for it,
        for objective text_size (clang's object has no IR to count) and with a budget. Otherwise the service
        is asked beside clang's back end, before that size exists."""
        return self.clang_baseline and self.objective == Objective.TEXT_SIZE and self.budget > 0

    def for_unit(self, bitcode_bytes: int) -> tuple[str, int]:
        """(strategy, samples) for a unit of `bitcode_bytes`: the settings', or the large-unit ones (the
        tuning store's strategy `stored` answers units of any length the same way)."""
        if self.stored:
            return self.strategy, 1
        if self.large_unit_bytes and bitcode_bytes > self.large_unit_bytes:
            return LARGE_UNIT_STRATEGY, LARGE_UNIT_LISTS
        return self.strategy, self.samples

    @classmethod
    def from_environment(cls, env: dict[str, str], clang: str) -> OptccSettings:
        def choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
            value = env.get(name, default).strip().lower()
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
            return value

        def number(name: str, default: float, kind=float, zero=False):
            try:
                value = kind(env.get(name, default))
            except ValueError:
                raise ConfigError(f"{name}={env[name]!r} is not a number") from None
            if value < 0 or (value == 0 and not zero):
                raise ConfigError(f"{name}={value} must {'not be negative' if zero else 'be positive'}")
            return value

        strategy = choice("OPTCC_STRATEGY", ServedStrategy.STORED.value, STRATEGIES)
        one = (ServedStrategy.GREEDY, ServedStrategy.STORED)
        samples = number("OPTCC_SAMPLES", 1 if strategy in one else 10, int)
        if strategy == ServedStrategy.GREEDY and samples != 1:
            raise ConfigError(
                f"OPTCC_SAMPLES={samples}: greedy gives one candidate; set OPTCC_STRATEGY=priority"
            )
        return cls(
            server=env.get("OPTCC_SERVER", "localhost:9000"),
            objective=choice("OPTCC_OBJECTIVE", Objective.TEXT_SIZE.value, OBJECTIVE_NAMES),
            ir_mode=choice("OPTCC_IR", "oz", tuple(IR_MODES)),
            strategy=strategy,
            samples=samples,
            deadline_s=number("OPTCC_DEADLINE", 10.0),
            budget=number("OPTCC_BUDGET", 2.0, zero=True),  # x the front end: docs/bench/clients.md
            budget_min_s=number("OPTCC_BUDGET_MIN", 0.2, zero=True),
            call_overhead_s=number("OPTCC_CALL_OVERHEAD", 0.4, zero=True),
            large_unit_bytes=_size(env.get("OPTCC_LARGE_UNIT", "16K"), "OPTCC_LARGE_UNIT"),
            retry_s=number("OPTCC_RETRY", 60.0),
            clang=clang,
            log_path=env.get("OPTCC_LOG") or None,
            verbose=env.get("OPTCC_VERBOSE", "") not in ("", "0"),
            cache_dir=_cache_dir(env),
            cache_max_bytes=_size(env.get("OPTCC_CACHE_SIZE", "5G"), "OPTCC_CACHE_SIZE"),
            recache=env.get("OPTCC_RECACHE", "") not in ("", "0"),
            clang_baseline=env.get("OPTCC_CLANG_BASELINE", "0").strip().lower() not in _OFF,
            baselines_dir=_baselines_dir(env),
            tap_dir=_tap_dir(env),
        )


class ResidentSettings(namedtuple("ResidentSettings", "enabled folder idle_s")):
    """optcc's resident process (resident_client.py, resident_server.py): whether a command goes to it
    (OPTCC_RESIDENT, default on), the private folder of its socket, lock and log (OPTCC_RESIDENT_DIR, default
    $XDG_RUNTIME_DIR/optserve, else ~/.cache/optserve/run) and how long it waits for a request before it
    exits (OPTCC_RESIDENT_IDLE seconds, default 600). Read by the thin client on every command: standard
    library only.

    Under pytest (PYTEST_CURRENT_TEST set) the default is off: a test suite's many optcc commands must not
    leave a server behind; a test that wants one sets OPTCC_RESIDENT=1 and a folder of its own."""

    __slots__ = ()

    @classmethod
    def from_environment(cls, env) -> ResidentSettings:
        default = "0" if env.get("PYTEST_CURRENT_TEST") else "1"
        enabled = env.get("OPTCC_RESIDENT", default).strip().lower() not in _OFF
        try:
            idle_s = float(env.get("OPTCC_RESIDENT_IDLE", "600"))
        except ValueError:
            raise ConfigError(f"OPTCC_RESIDENT_IDLE={env['OPTCC_RESIDENT_IDLE']!r} is not a number") from None
        if not idle_s > 0:
            raise ConfigError(f"OPTCC_RESIDENT_IDLE={idle_s} must be positive")
        return cls(enabled, _resident_folder(env), idle_s)


def _resident_folder(env) -> str | None:
    """OPTCC_RESIDENT_DIR, else $XDG_RUNTIME_DIR/optserve (per user, on tmpfs, removed at logout), else
    ~/.cache/optserve/run; None when there is no home either."""
    if env.get("OPTCC_RESIDENT_DIR"):
        return env["OPTCC_RESIDENT_DIR"]
    if env.get("XDG_RUNTIME_DIR"):
        return os.path.join(env["XDG_RUNTIME_DIR"], "optserve")
    home = env.get("HOME")
    return os.path.join(home, ".cache", "optserve", "run") if home else None


_OFF = ("0", "false", "no", "off")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str, name: str) -> int:
    """Bytes from `500M`, `5G`, `1.5G`, `0` (no limit) or a number of bytes (K, M, G, T: powers of 1024)."""
    number = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = number[-1:] if number[-1:] in _SIZE_UNITS else ""
    try:
        value = float(number[: len(number) - len(unit)])
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not a size such as 500M or 5G") from None
    if value < 0:
        raise ConfigError(f"{name}={text!r} must not be negative")
    return int(value * _SIZE_UNITS[unit])


def _baselines_dir(env: dict[str, str]) -> str | None:
    """OPTCC_BASELINE_DIR, else `baselines` in the object cache's folder; None with OPTCC_CACHE=0 or
    OPTCC_BASELINE_DIR=0 (baseline_memo.py)."""
    named = env.get("OPTCC_BASELINE_DIR", "").strip()
    if named.lower() in _OFF and named:
        return None
    if named:
        return named
    cache = _cache_dir(env)
    return os.path.join(cache, "baselines") if cache else None


def _tap_dir(env: dict[str, str]) -> str | None:
    """The bitcode taps' folder (bitcode_tap.py): OPTCC_TAP_DIR, else $XDG_CACHE_HOME/optcc/tap, else
    ~/.cache/optcc/tap, whatever the object cache's folder (a tap belongs to the compiler, not to a cache);
    None with OPTCC_TAP=0."""
    if env.get("OPTCC_TAP", "1").strip().lower() in _OFF:
        return None
    if env.get("OPTCC_TAP_DIR"):
        return env["OPTCC_TAP_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "optcc", "tap")
    home = env.get("HOME")
    return os.path.join(home, ".cache", "optcc", "tap") if home else None


def _cache_dir(env: dict[str, str]) -> str | None:
    """OPTCC_CACHE_DIR, else $XDG_CACHE_HOME/optcc, else ~/.cache/optcc; None with OPTCC_CACHE=0."""
    if env.get("OPTCC_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    if env.get("OPTCC_CACHE_DIR"):
        return env["OPTCC_CACHE_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "optcc")
    home = env.get("HOME")
    return os.path.join(home, ".cache", "optcc") if home else None
