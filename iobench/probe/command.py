"""Which commands the probe can run: Python programs, since it reaches a job through Python's
``sitecustomize`` (``python train.py``, ``python -m pkg``, ``torchrun ...``, or a script whose ``#!``
line runs Python). Anything else is refused with the reason, before it starts."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

# interpreter options that keep sitecustomize or PYTHONPATH from a process
BLOCKING_FLAGS = {
    "-I": "isolated mode ignores PYTHONPATH",
    "-E": "-E ignores PYTHONPATH",
    "-S": "-S skips site",
}
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class JobCommand:
    argv: tuple[str, ...]
    name: str  # what the job is called: its script or module


def _shebang(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    return head[2:].split(b"\n", 1)[0].decode(errors="replace").strip()


def _is_python(executable: Path) -> bool:
    return bool(_PYTHON.match(executable.name)) or bool(
        _PYTHON.match(Path(os.path.realpath(executable)).name)
    )


def _describe(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if head == b"\x7fELF":
        return "a compiled program"
    line = _shebang(path)
    return f"a script run by {line.split()[0]}" if line else "not a Python program"


LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")  # `python -m` them: the script follows


def _job_name(args: list[str]) -> str:
    """The script's or module's name among a Python command's arguments (past a launcher)."""
    for i, arg in enumerate(args):
        if arg in ("-m", "--module") and i + 1 < len(args) and args[i + 1] not in LAUNCHERS:
            return args[i + 1]
        if arg.endswith(".py"):
            return Path(arg).stem
    return "job"


def check_command(argv: list[str]) -> JobCommand:
    """The command as the probe runs it; ValueError saying why it cannot."""
    if not argv:
        raise ValueError("give the job's command after --, e.g. iobench probe -- python train.py")
    found = shutil.which(argv[0])
    if found is None:
        raise ValueError(
            f"{argv[0]}: no such command (not on PATH, not a file); give the job's command after --"
        )
    exe = Path(found)
    refuse = (
        f"{argv[0]} is {_describe(exe)}, not Python: the probe reaches a job through Python's sitecustomize, so "
        "it runs Python commands (python train.py, python -m pkg, torchrun train.py); give it the Python "
        f"command that {argv[0]} runs"
    )
    if _is_python(exe):
        for arg in argv[1:]:
            if arg in BLOCKING_FLAGS:
                raise ValueError(
                    f"{' '.join(argv)}: {BLOCKING_FLAGS[arg]}, so the probe cannot reach the job; drop {arg}"
                )
            if not arg.startswith("-") or arg in ("-m", "-c"):
                break
        return JobCommand(tuple(argv), _job_name(argv[1:]))
    line = _shebang(exe)
    if line is None or not any(_PYTHON.match(Path(word).name) for word in line.split()[:2]):
        raise ValueError(refuse)
    return JobCommand(tuple(argv), _job_name(argv[1:]) if exe.name == "torchrun" else exe.stem)
