"""A parallel file system's rate from the JSON IOR and elbencho write (their keys as ior-output.c
and elbencho's Statistics.cpp write them), and what a benchmark file says it measured kept beside
its rate, so a rate that cannot be the tier's is refused before it is used."""

from __future__ import annotations

import json
import re

import pytest

from iobench.recommend.benchfiles import read_file
from iobench.recommend.rates import parse_tier_rate, read_benchmark

MIB = 2**20


def _ior(tmp_path, *, nodes: int = 1, direct: bool = True, filesize: str = "512.00 GiB"):
    doc = {
        "Version": "4.0.0",
        "Command line": "ior -r -t 1m -b 16g" + (" -B" if direct else ""),
        "tests": [
            {
                "TestID": 0,
                "Options": {
                    "api": "POSIX",
                    "nodes": nodes,
                    "tasks": 32 * nodes,
                    "clients per node": 32,
                    "aggregate filesize": filesize,
                },
            }
        ],
        "summary": [
            {"operation": "write", "API": "POSIX", "bwMeanMIB": 9000.0},
            {
                "operation": "read",
                "API": "POSIX",
                "numTasks": 32 * nodes,
                "repetitions": 3,
                "bwMeanMIB": 20000.0,
            },
        ],
    }
    path = tmp_path / "ior.json"
    path.write_text("IOR-4.0.0: MPI Coordinated Test of Parallel I/O\n" + json.dumps(doc))
    return path


def test_ior_read_is_what_one_node_read(tmp_path):
    r = read_file(_ior(tmp_path), "x")
    assert (r.tool, r.bytes_per_s, r.direct) == ("IOR", 20000.0 * MIB, True)
    # four nodes together: a node reads its quarter
    r = read_file(_ior(tmp_path, nodes=4), "x")
    assert r.bytes_per_s == 5000.0 * MIB and "from 4 nodes together, per node" in r.said
    key, f = parse_tier_rate(f"pfs={_ior(tmp_path)}", ram_bytes=2e12)
    assert key == "pfs" and f.value == 20000.0 * MIB and f.origin == "given" and not f.caveat


def test_a_buffered_read_that_fits_in_ram_is_refused(tmp_path):
    path = _ior(tmp_path, direct=False, filesize="512.00 GiB")
    with pytest.raises(ValueError, match=re.escape("the page cache served it, not the storage")):
        parse_tier_rate(f"pfs={path}", ram_bytes=2e12)  # 550 GB read through a 2 TB page cache
    _, f = parse_tier_rate(f"pfs={path}", ram_bytes=256e9)  # more than the RAM: it reached the storage
    assert f.value == 20000.0 * MIB and not f.caveat


def _elbencho(tmp_path, command: str):
    rows = [
        {"operation": "WRITE", "MiB/s [last]": "3000", "threads": "16"},
        {
            "operation": "READ",
            "MiB/s [last]": "4500",
            "MiB [last]": "819200",
            "threads": "16",
            "version": "3.0-25",
            "command": command,
        },
    ]
    path = tmp_path / "elbencho.json"
    path.write_text(json.dumps(rows))
    return path


def test_elbencho_read_and_its_direct_flag(tmp_path):
    r = read_file(_elbencho(tmp_path, '"elbencho" "-r" "-t" "16" "--direct" "/mnt/lustre/f"'), "x")
    assert (r.tool, r.bytes_per_s, r.direct, r.footprint_bytes) == (
        "elbencho",
        4500 * MIB,
        True,
        819200 * MIB,
    )
    r = read_file(_elbencho(tmp_path, '"elbencho" "-r" "--hosts" "n1 n2" "/mnt/weka/f"'), "x")
    assert not r.direct and "on several hosts (--hosts): their total, not one node's" in r.said
    with pytest.raises(ValueError, match="is an elbencho measurement, which does not measure 'object'"):
        read_benchmark(str(_elbencho(tmp_path, "--direct")), "object", "--tier-rate object=...")


def test_a_file_no_tool_wrote_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"throughput": 5}')
    with pytest.raises(ValueError, match="is not the JSON of fio, IOR, elbencho, warp or rados bench"):
        read_benchmark(str(path), "pfs", "--tier-rate pfs=...")
