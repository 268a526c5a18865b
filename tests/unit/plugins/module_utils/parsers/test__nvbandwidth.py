# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/parsers/_nvbandwidth.py on the captures of tests/fixtures/nvbandwidth (SOURCES.md).
Expected values were read from the files by eye; inputs built here are labelled "constructed"."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvbandwidth as B

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

DIR = os.path.join(FIXTURES, 'nvbandwidth')
H100_D2D = 'h100-8gpu-v0.4-drv570.133.20_d2d-read-ce_azurehpc-health-checks-fork.txt'
JSON_1GPU = '1gpu-v0.5-drv565.02_verbose-json_dcgm-tests.json'
README_D2D = '8gpu_d2d-write-ce_nvbandwidth-readme.txt'
README_H2D = '8gpu_h2d-ce_nvbandwidth-readme.txt'


def read(name):
    with open(os.path.join(DIR, name)) as handle:
        return handle.read()


def test_every_capture_is_tested():
    assert sorted(os.listdir(DIR)) == sorted([H100_D2D, JSON_1GPU, README_D2D, README_H2D])


def test_h100_eight_gpus_device_to_device_read():
    parsed = B.parse_nvbandwidth(read(H100_D2D))
    assert (parsed['version'], parsed['git_version']) == ('v0.4', 'v0.4.2-12-g8857188')
    assert (parsed['cuda_runtime'], parsed['cuda_driver'], parsed['driver_version']) == (12020, 12080, '570.133.20')
    assert [d['name'] for d in parsed['devices']] == ['NVIDIA H100 80GB HBM3'] * 8
    assert parsed['devices'][0]['bus_id'] is None
    assert len(parsed['notes']) == 2
    [case] = parsed['testcases']
    assert (case['name'], case['status'], case['sum']) == ('device_to_device_memcpy_read_ce', 'Passed', 20785.58)
    assert case['description'] == 'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)'
    assert case['column_labels'] == [str(n) for n in range(8)] and case['row_labels'] == [str(n) for n in range(8)]
    assert [row[n] for n, row in enumerate(case['matrix'])] == [None] * 8
    assert case['matrix'][2][4] == 372.96
    measured = B.cells(case)
    assert len(measured) == 56
    assert min(cell[2] for cell in measured) == 370.26
    assert B.testcase(parsed, 'host_to_device_memcpy_ce') is None


def test_json_one_gpu_verbose():
    parsed = B.parse_nvbandwidth(read(JSON_1GPU))
    assert (parsed['version'], parsed['driver_version'], parsed['cuda_runtime']) == ('v0.5', '565.02', 12070)
    assert len(parsed['testcases']) == 32
    h2d = B.testcase(parsed, 'host_to_device_memcpy_ce')
    assert (h2d['status'], h2d['matrix'], h2d['sum']) == ('Passed', [[12.3964]], 12.396361291250001)
    assert h2d['description'] == 'memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)'
    assert (h2d['min'], h2d['max']) == (12.396361291250001, 12.396361291250001)
    assert B.testcase(parsed, 'device_to_host_memcpy_ce')['matrix'] == [[13.2001]]
    assert B.testcase(parsed, 'device_to_device_memcpy_read_ce')['status'] == 'Waived'
    assert parsed['waived'] == sum(1 for case in parsed['testcases'] if case['status'] == 'Waived')
    latency = B.testcase(parsed, 'host_device_latency_sm')
    assert latency['description'] == 'memory latency SM CPU(row) <-> GPU(column) (ns)'


def test_readme_examples_are_runs_cut_before_their_sum():
    """NVIDIA's README shows the matrix only (no SUM line): the test case stays 'Running' - the run did not end."""
    d2d = B.parse_nvbandwidth(read(README_D2D))['testcases'][0]
    assert (d2d['name'], d2d['status'], d2d['sum']) == ('device_to_device_memcpy_write_ce', 'Running', None)
    assert d2d['matrix'][6][0] == 274.89 and d2d['matrix'][0][0] == 0.0
    h2d = B.parse_nvbandwidth(read(README_H2D))['testcases'][0]
    assert h2d['row_labels'] == ['0'] and len(h2d['matrix'][0]) == 8 and h2d['matrix'][0][4] == 26.19


# constructed: the v0.8 layout (output.cpp) with a host name, bus ids, a waived and a failing test
CONSTRUCTED = """\
nvbandwidth Version: v0.8
Built from Git version: v0.8

CUDA Runtime Version: 13000
CUDA Driver Version: 13000
Driver Version: 580.95.05

node01
Device 0: NVIDIA H100 80GB HBM3 (00000000:18:00)
Device 1: NVIDIA H100 80GB HBM3 (00000000:2a:00)

Running host_to_device_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     55.23     54.98

SUM host_to_device_memcpy_ce 110.21
Waived:{space}
Running device_to_device_memcpy_read_ce.
Error: cudaErrorPeerAccessUnsupported

NOTE: The reported results may not reflect the full capabilities of the platform.
Performance can vary with software drivers, hardware clocks, and system topology.
""".replace("{space}", " ")  # output.cpp prints "Waived: " with its space


def test_constructed_recent_layout():
    parsed = B.parse_nvbandwidth(CONSTRUCTED)
    assert parsed['host'] == 'node01'
    assert parsed['devices'][1] == {'index': 1, 'name': 'NVIDIA H100 80GB HBM3', 'bus_id': '00000000:2a:00'}
    h2d, d2d = parsed['testcases']
    assert (h2d['status'], h2d['sum'], h2d['matrix']) == ('Passed', 110.21, [[55.23, 54.98]])
    assert (d2d['status'], d2d['error']) == ('Error', 'cudaErrorPeerAccessUnsupported')
    assert parsed['waived'] == 1 and len(parsed['notes']) == 2


@pytest.mark.parametrize('text, message', [
    ('Running x_ce.\nmemcpy CE\n   0   1\n0   1.0\n', "line 4 '0   1.0': a matrix row of x_ce: expected a label and 2"),
    ('Running x_ce.\nmemcpy CE\n   0\n0   fast\n', "line 4 '0   fast': 'fast' is neither a number nor N/A"),
    ('Running x_ce.\nmemcpy CE\n   0\n0   1.0\n\nSUM y_ce 1.0\n', 'SUM names a test case that is not the one running'),
    ('nvbandwidth Version: v0.8\nsomething else entirely\n',
     "line 2 'something else entirely': not a line nvbandwidth prints here"),
    ('{"nvbandwidth": {"testcases": [{"status": "Passed"}]}}', 'testcases[0] has no "name"'),
    ('{"nvbandwidth": {"testcases": [{"name": "a", "bandwidth_matrix": [["1.0", "x"]]}]}}',
     "testcases[0] (a) bandwidth_matrix[0]: 'x' is neither a number nor N/A"),
    ('{"other": 1}', 'expected {"nvbandwidth": {...}}'),
    ('{"nvbandwidth": ', 'the JSON document does not parse'),
])
def test_errors_name_the_line(text, message):
    with pytest.raises(B.NvbandwidthParseError) as err:
        B.parse_nvbandwidth(text)
    assert message in str(err.value)


def test_json_after_warning_lines():
    # constructed: nvbandwidth's own WARNING lines before the document (as NVIDIA/DCGM's test input with errors has)
    parsed = B.parse_nvbandwidth('WARNING: Failed to acquire log file lock\n{"nvbandwidth": {"version": "v0.5"}}')
    assert parsed['version'] == 'v0.5' and parsed['warnings'] == ['WARNING: Failed to acquire log file lock']


def test_constructed_bidirectional_device_test_prints_three_matrices():
    # constructed in the layout of testcases_ce.cpp (DeviceToDeviceBidirReadCE: _read1, _read2, _total)
    text = ('Running device_to_device_bidirectional_memcpy_read_ce.\n'
            'memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)\n           0         1\n'
            ' 0       N/A    370.00\n 1    371.00       N/A\n\n'
            'SUM device_to_device_bidirectional_memcpy_read_ce_read1 741.00\n\n'
            'memcpy CE GPU(row) <-> GPU(column) Read2 bandwidth (GB/s)\n           0         1\n'
            ' 0       N/A    360.00\n 1    361.00       N/A\n\n'
            'SUM device_to_device_bidirectional_memcpy_read_ce_read2 721.00\n\n'
            'memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)\n           0         1\n'
            ' 0       N/A    730.00\n 1    732.00       N/A\n\n'
            'SUM device_to_device_bidirectional_memcpy_read_ce_total 1462.00\n')
    [case] = B.parse_nvbandwidth(text)['testcases']
    assert case['status'] == 'Passed' and case['sum'] == 741.0
    assert [(m['key'], m['sum']) for m in case['matrices']] == [
        ('device_to_device_bidirectional_memcpy_read_ce_read1', 741.0),
        ('device_to_device_bidirectional_memcpy_read_ce_read2', 721.0),
        ('device_to_device_bidirectional_memcpy_read_ce_total', 1462.0)]
    assert case['matrices'][2]['matrix'][1][0] == 732.0


def test_results_are_plain_data():
    for name in (H100_D2D, JSON_1GPU):
        json.dumps(B.parse_nvbandwidth(read(name)))


def test_a_build_without_git_prints_an_empty_git_version():
    """Constructed input (the two header lines only, as output.cpp of v0.8 prints them when CMake's `git describe`
    gave nothing: a build from a release tarball), followed by one real capture's body."""
    with open(os.path.join(DIR, '8gpu_h2d-ce_nvbandwidth-readme.txt')) as handle:
        body = handle.read()
    parsed = B.parse_nvbandwidth('nvbandwidth Version: v0.8\nBuilt from Git version: \n\n' + body)
    assert (parsed['version'], parsed['git_version']) == ('v0.8', '')
    assert parsed['testcases'][0]['name'] == 'host_to_device_memcpy_ce'
