"""``--set KEY=VALUE``: change a sweep file from the command line without editing it.

KEY is a dotted path into the YAML (``run.epochs``, ``loaders[0].workers``, ``dataset.synth.size``);
``loader.X``, ``tier.X`` and ``accelerator.X`` set X in every entry of loaders, tiers and
accelerators. VALUE is read as YAML, so ``[1,2,4]`` is a list, ``8`` a number, ``{a: 1}`` a
mapping. Overrides change the raw mapping before validation: a wrong key or value is reported by
the same checks, naming the same key, as if it had been written in the file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import yaml

from iobench.sweep.checks import ConfigError

SHORTHANDS = {"loader": "loaders", "tier": "tiers", "accelerator": "accelerators"}
_SEGMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)$")
_EXAMPLE = "e.g. --set loader.workers=[1,2,4] or --set run.epochs=2"

KeyPath = list[str | int]


def _render(path: KeyPath) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def parse_assignment(text: str) -> tuple[str, KeyPath, Any]:
    """``"loaders[0].workers=[1, 2]"`` -> (the key as written, ["loaders", 0, "workers"], [1, 2])."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, {_EXAMPLE}")
    path: KeyPath = []
    for part in key.split("."):
        m = _SEGMENT.match(part)
        if not m:
            raise ConfigError(
                f"--set {key}: {part!r} is not a key; write names or name[index] joined by dots, {_EXAMPLE}"
            )
        path.append(m.group(1))
        path.extend(int(i) for i in re.findall(r"\d+", m.group(2)))
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"--set {key}={value!r}: not a YAML value ({getattr(exc, 'problem', exc)})"
        ) from None
    return key, path, parsed


def _step(node: Any, step: str | int, path: KeyPath, key: str) -> None:
    """Check that ``node`` (reached by ``path``) can be indexed by ``step``."""
    here = _render(path) or "the config"
    if isinstance(step, int):
        if not isinstance(node, list):
            raise ConfigError(f"--set {key}: {here} is not a list, so [{step}] cannot index it")
        if step >= len(node):
            raise ConfigError(
                f"--set {key}: {_render([*path, step])} does not exist ({here} has {len(node)})"
            )
    elif not isinstance(node, dict):
        raise ConfigError(f"--set {key}: {here}={node!r} is not a mapping, so it has no key {step!r}")


def _assign(root: dict, path: KeyPath, value: Any, key: str) -> None:
    node: Any = root
    for depth, step in enumerate(path[:-1]):
        _step(node, step, path[:depth], key)
        if isinstance(step, str) and node.get(step) is None:
            # a missing section is created, so --set dataset.synth.samples=64 works on a path dataset
            # (validation then says what the combination means)
            node[step] = [] if isinstance(path[depth + 1], int) else {}
        node = node[step]
    _step(node, path[-1], path[:-1], key)
    node[path[-1]] = copy.deepcopy(value)


def apply_overrides(raw: Any, assignments: Sequence[str]) -> Any:
    """A copy of ``raw`` with every ``KEY=VALUE`` of ``assignments`` applied in order."""
    if not assignments:
        return raw
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return raw  # validation reports a file that is not a mapping
    out = copy.deepcopy(raw)
    for text in assignments:
        key, path, value = parse_assignment(text)
        head = path[0]
        if head not in SHORTHANDS:
            _assign(out, path, value, key)
            continue
        plural = SHORTHANDS[head]
        if len(path) > 1 and isinstance(path[1], int):  # loader[1].workers: one entry
            _assign(out, [plural, *path[1:]], value, key)
            continue
        entries = out.get(plural)
        if len(path) < 2:
            raise ConfigError(
                f"--set {key}: name what to set in every entry of {plural}, e.g. {head}.workers"
            )
        if not isinstance(entries, list) or not entries:
            raise ConfigError(
                f"--set {key}: {head}.X sets X in every entry of {plural}, but {plural} is empty"
            )
        for i in range(len(entries)):
            _assign(out, [plural, i, *path[1:]], value, key)
    return out
