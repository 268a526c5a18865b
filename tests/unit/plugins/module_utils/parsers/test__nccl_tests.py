# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/parsers/_nccl_tests.py on the real captures of tests/fixtures/nccl-tests (SOURCES.md).
Expected values were read from the files by eye; inputs built here are labelled "constructed"."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nccl_tests as P

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

DIR = os.path.join(FIXTURES, 'nccl-tests')
H100 = 'h100-16gpu-2node_all_reduce_perf_a3mega-ztan.txt'
GH200 = 'gh200-16gpu-4node-nccl-tests-2.17.9_all_reduce_perf-wrong_sigma2-olivia.txt'


def read(name):
    with open(os.path.join(DIR, name)) as handle:
        return handle.read()


def test_every_capture_is_tested():
    assert sorted(os.listdir(DIR)) == sorted([H100, GH200])


def test_h100_two_nodes_release_without_version_line():
    parsed = P.parse_nccl_tests(read(H100))
    assert parsed['version'] is None and parsed['binary'] is None
    assert parsed['params'] == {'nthread': 1, 'ngpus': 1, 'min_bytes': 8, 'max_bytes': 8589934592, 'step': 2,
                                'step_kind': 'factor', 'warmup_iters': 5, 'iters': 20, 'agg_iters': 1,
                                'validation': 1, 'graph': 0}
    assert len(parsed['devices']) == 16
    assert parsed['devices'][15] == {'rank': 15, 'group': 0, 'pid': 6740, 'host': 'ztan-mig-gq73', 'device': 7,
                                     'bus_id': '0000:8c:00', 'name': 'NVIDIA H100 80GB HBM3'}
    assert [row['size'] for row in parsed['rows']] == [8 * 2 ** n for n in range(31)]
    last = P.largest(parsed)
    assert last['out_of_place'] == {'time_us': 47535.0, 'algbw': 180.71, 'busbw': 338.82, 'wrong': 0}
    assert last['in_place'] == {'time_us': 47743.0, 'algbw': 179.92, 'busbw': 337.35, 'wrong': 0}
    assert (last['count'], last['type'], last['redop'], last['root']) == (2147483648, 'float', 'sum', -1)
    assert P.row_at(parsed, 1073741824)['out_of_place']['busbw'] == 297.86
    assert (parsed['out_of_bounds'], parsed['out_of_bounds_ok']) == (0, True)
    assert (parsed['avg_busbw'], parsed['avg_busbw_check']) == (70.742, None)
    assert parsed['wrong_total'] == 0 and P.wrong_rows(parsed) == []
    assert parsed['complete'] is True


def test_gh200_corrupted_transfers_count_wrong_values():
    """The Olivia capture: data corruption shows in #wrong between 2 MiB and 64 MiB; the copy ends at the last row
    (the summary lines are not in the published text), so the run reads as incomplete."""
    parsed = P.parse_nccl_tests(read(GH200))
    assert (parsed['version'], parsed['nccl_headers'], parsed['nccl_library']) == ('2.17.9', 22902, 22902)
    assert parsed['binary'] == 'all_reduce_perf'
    assert parsed['devices'][4]['host'] == 'gpu-1-47' and parsed['devices'][4]['bus_id'] == '0009:01:00'
    assert len(parsed['rows']) == 28
    assert P.wrong_rows(parsed) == [
        (2097152, 18134, 9609), (4194304, 96817, 124342), (8388608, 763876, 530181), (16777216, 404221, 103664),
        (33554432, 951005, 820604), (67108864, 113492, 0)]
    assert parsed['wrong_total'] == (18134 + 9609 + 96817 + 124342 + 763876 + 530181 + 404221 + 103664 + 951005
                                     + 820604 + 113492)
    assert P.row_at(parsed, 4194304)['in_place']['time_us'] == 10542.7
    assert parsed['complete'] is False and parsed['avg_busbw'] is None and parsed['out_of_bounds'] is None


# constructed: the layout of nccl-tests 2.19 (src/util.cu) with a failing footer, NCCL's own lines and N/A #wrong
CONSTRUCTED = """\
# nccl-tests version 2.19.6 (a0b82b2) nccl-headers=23007 nccl-library=23007
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 17179869184 maxBytes 17179869184 step: 2(factor) warmup iters: 1 iters: 20 \
agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
NCCL version 2.30.7+cuda13.0
node01:4242:4242 [0] NCCL WARN some warning
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
 17179869184    4294967296     float     sum      -1    70000  245.43  429.50       3    70100  245.08  428.89     N/A
# Out of bounds values : 3 FAILED
# Avg bus bandwidth    : 429.195 FAILED
#
# Collective test concluded: all_reduce_perf
"""


def test_constructed_recent_layout_with_failures():
    parsed = P.parse_nccl_tests(CONSTRUCTED)
    assert (parsed['version'], parsed['git_commit']) == ('2.19.6', 'a0b82b2')
    assert parsed['params']['ngpus'] == 8 and parsed['params']['unalign'] == 0
    assert parsed['nccl_messages'] == ['NCCL version 2.30.7+cuda13.0', 'node01:4242:4242 [0] NCCL WARN some warning']
    row = parsed['rows'][0]
    assert row['out_of_place']['wrong'] == 3 and row['in_place']['wrong'] is None
    assert parsed['wrong_total'] == 3
    assert (parsed['out_of_bounds'], parsed['out_of_bounds_ok']) == (3, False)
    assert (parsed['avg_busbw'], parsed['avg_busbw_check']) == (429.195, 'FAILED')
    assert parsed['complete'] is True


def test_constructed_old_layout_without_root_and_with_error_column():
    # constructed in the layout of nccl-tests before 2.11 (NVIDIA/nccl-tests issue #44 shows one): no root column,
    # "error" instead of "#wrong"
    text = ('#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n'
            '     1048576        131072   float     sum    47.38   11.06   11.06  0e+00    46.84   11.19   11.19  0e+00\n'
            '# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 6.6\n')
    parsed = P.parse_nccl_tests(text)
    row = parsed['rows'][0]
    assert row['root'] is None and row['out_of_place'] == {'time_us': 47.38, 'algbw': 11.06, 'busbw': 11.06,
                                                           'error': 0.0}
    assert parsed['wrong_total'] is None and parsed['complete'] is True


@pytest.mark.parametrize('text, message', [
    ('     1024   256   float   sum   -1   28.5  0.04  0.07  0  28.2  0.04  0.07  0\n',
     'line 1 \'     1024   256   float   sum   -1   28.5  0.04  0.07  0  28.2  0.04  0.07  0\': a result row before the '
     'column header'),
    ('#       size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n'
     '     1024   256   float   sum   -1   28.5  0.04  0.07\n', 'expected 13 columns, found 8'),
    ('#       size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n'
     '     1024   256   float   sum   -1   28.5  fast  0.07  0  28.2  0.04  0.07  0\n', "algbw 'fast' is not a number"),
    ('#       count  size  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n',
     'a result header must start with "size count type redop"'),
    ('#       size  count  type  redop  root  time  algbw  busbw  #wrong\n',
     'expected an out-of-place and an in-place group'),
    ('Segmentation fault (core dumped)\n', "line 1 'Segmentation fault (core dumped)': expected a result row"),
])
def test_errors_name_the_line(text, message):
    with pytest.raises(P.NcclTestsParseError) as err:
        P.parse_nccl_tests(text)
    assert message in str(err.value)


def test_empty_output_is_an_incomplete_run():
    parsed = P.parse_nccl_tests('')
    assert parsed['rows'] == [] and parsed['complete'] is False and P.largest(parsed) is None
