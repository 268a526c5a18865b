# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/rules/_fitness_thresholds.py: every figure names a known source, docs/readiness-thresholds.md
shows the same figures, product names of the real captures find their model, overrides are checked."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _fitness_thresholds as T

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, ROOT

DOC = os.path.join(ROOT, 'docs', 'readiness-thresholds.md')


def doc_rows():
    """The per-model table of the doc: {model key: [cells]}."""
    with open(DOC) as handle:
        text = handle.read()
    rows = {}
    for line in text.splitlines():
        match = re.match(r'^\| [^|]*\(`([a-z0-9-]+)`\) \|(.*)\|$', line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split('|')]
    return rows


def test_every_source_key_is_known():
    for entry in T.MODELS:
        keys = [entry['nvlinks_source']]
        for block in ('pcie', 'allreduce', 'nvbandwidth', 'reference'):
            if entry.get(block):
                keys.append(entry[block]['source'])
        keys += [other['source'] for other in entry['allreduce_other']]
        for key in keys:
            assert key in T.SOURCES, (entry['key'], key)
    for key in T.REMAPPED_ROWS['sources'] + T.NVLINK_ERRORS['sources'] + T.CLOCK_REASONS_SOURCES + \
            T.PCIE_IDLE_SOURCES + T.VBIOS_SOURCES:
        assert key in T.SOURCES


def test_doc_table_lists_every_model_with_its_figures():
    rows = doc_rows()
    assert sorted(rows) == sorted(entry['key'] for entry in T.MODELS)
    for entry in T.MODELS:
        links, speed, pcie, busbw, _shape, _other, nvb, _ref = rows[entry['key']]
        assert links.startswith('{0} ('.format(entry['nvlinks'])) or links.startswith('{0},'.format(entry['nvlinks']))
        assert speed.startswith('none' if entry['nvlink_gbps_min'] is None else '{0} ('.format(entry['nvlink_gbps_min']))
        assert pcie.startswith('none' if not entry['pcie'] else 'Gen{gen} x{width} ('.format(**entry['pcie']))
        allreduce = entry['allreduce']
        assert busbw.startswith('none' if not allreduce else '{0} ('.format(allreduce['busbw_gbps']))
        if entry['nvbandwidth']:
            keys = ('host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce')
            figures = [entry['nvbandwidth'][k] for k in keys]
            assert nvb.startswith(' / '.join('none' if f is None else str(f) for f in figures))
        else:
            assert nvb == 'none'


def test_doc_cites_the_issue_figures():
    # the figures issue #28 quotes, checked against the Azure configuration files by hand
    assert T.model_for('NVIDIA H100 80GB HBM3')['allreduce']['busbw_gbps'] == 460.0
    assert T.model_for('NVIDIA H200')['allreduce']['busbw_gbps'] == 431.0


@pytest.mark.parametrize('capture, key', [
    ('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml', 'h100-sxm'),
    ('b200-8gpu_k8s-test-infra.xml', 'b200'),
    ('gb200-4gpu-arm64_k8s-test-infra.xml', 'gb200'),
    ('gb300-4gpu_k8s-test-infra.xml', 'gb300'),
    ('a100-sxm4-40gb-1gpu_k8s-test-infra.xml', 'a100-sxm4'),
    ('a100-sxm4-1gpu_telegraf.xml', 'a100-sxm4'),
    ('l40s-1gpu_k8s-test-infra.xml', None),
    ('tesla-v100-pcie-1gpu_datakit.xml', None),
    ('tesla-t4-1gpu_k8s-test-infra.xml', None),
])
def test_model_of_real_product_names(capture, key):
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', capture)) as handle:
        name = parse_nvsmi_xml(handle.read())['gpus'][0]['name']
    entry = T.model_for(name)
    assert (entry['key'] if entry else None) == key


@pytest.mark.parametrize('name, key', [
    ('NVIDIA H200', 'h200'), ('NVIDIA H200 NVL', None), ('NVIDIA H100 PCIe', None), ('NVIDIA H800', 'h800-sxm'),
    ('NVIDIA H800 PCIe', None), ('NVIDIA A800-SXM4-80GB', 'a800-sxm4'), ('Tesla V100-SXM2-32GB', 'v100-sxm2'),
    ('NVIDIA B300 SXM6 AC', 'b300'), ('NVIDIA GB300', 'gb300'), ('', None), (None, None),
])
def test_model_of_names(name, key):
    entry = T.model_for(name)
    assert (entry['key'] if entry else None) == key


def test_thresholds_flat_with_sources_and_overrides():
    got = T.thresholds('NVIDIA H100 80GB HBM3')
    assert got['allreduce_busbw_gbps']['value'] == 460.0
    assert got['allreduce_busbw_gbps']['source_key'] == 'azure-nhc'
    assert got['allreduce_min_bytes']['value'] == got['allreduce_max_bytes']['value'] == 16 * 1024 ** 3
    assert got['device_to_device_read_gbps']['value'] == 335.0
    assert got['nvlinks']['value'] == 18 and got['model']['value'] == 'h100-sxm'
    got = T.thresholds('NVIDIA GB200', {'allreduce_busbw_gbps': 600.0, 'nvlinks': None})
    assert got['allreduce_busbw_gbps'] == {'value': 600.0, 'source': 'setting', 'source_key': 'setting'}
    assert got['nvlinks']['value'] == 18
    got = T.thresholds('NVIDIA L40S')
    assert got['allreduce_busbw_gbps'] == {'value': None, 'source': None, 'source_key': None}
    assert got['remapped_rows_uncorrectable_max']['value'] == 512
    assert got['nvlink_replay_errors_max']['value'] == got['nvlink_recovery_errors_max']['value'] == 0
    assert got['nvlink_crc_errors_max'] == {'value': None, 'source': None, 'source_key': None}
    got = T.thresholds('NVIDIA H100 80GB HBM3', {'nvlink_crc_errors_max': 0, 'remapped_rows_uncorrectable_max': 0})
    assert got['nvlink_crc_errors_max']['value'] == 0 and got['remapped_rows_uncorrectable_max']['source'] == 'setting'


@pytest.mark.parametrize('overrides, message', [
    ({'allreduce': 1.0}, 'allreduce: not a threshold (allowed: nvlinks, '),
    ({'nvlinks': 0}, 'nvlinks=0: a threshold is a number above 0'),
    ({'nvlinks': True}, 'nvlinks=True: a threshold is a number above 0'),
    ({'allreduce_busbw_gbps': '460'}, "allreduce_busbw_gbps='460': a threshold is a number above 0"),
    ({'nvlink_replay_errors_max': -1}, 'nvlink_replay_errors_max=-1: a count of errors is a whole number, 0 or more'),
    ({'remapped_rows_uncorrectable_max': 1.5},
     'remapped_rows_uncorrectable_max=1.5: a count of errors is a whole number, 0 or more'),
])
def test_bad_overrides(overrides, message):
    with pytest.raises(T.ThresholdError) as err:
        T.thresholds('NVIDIA H100 80GB HBM3', overrides)
    assert message in str(err.value)


@pytest.mark.parametrize('gen, width, expected', [(5, 16, 31), (4, 16, 16), (1, 1, 1), (3, 8, 4), (7, 16, 62),
                                                  (None, 16, None), (5, None, None)])
def test_pcie_replays_per_minute(gen, width, expected):
    # DCGM: ceil(rate per lane x lanes); generations above 6 use the Gen6 rate
    assert T.pcie_replays_per_minute(gen, width) == expected


def test_clock_reasons_cover_the_xml_reasons():
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')) as handle:
        reasons = parse_nvsmi_xml(handle.read())['gpus'][0]['clocks_event_reasons']
    assert sorted(reasons) == sorted(T.CLOCK_REASONS)
    assert sorted(k for k, v in T.CLOCK_REASONS.items() if v == 'fail') == [
        'hw_power_brake_slowdown', 'hw_slowdown', 'hw_thermal_slowdown', 'sw_thermal_slowdown']


def test_models_is_a_copy():
    copy = T.models()
    copy[0]['nvlinks'] = 1
    assert T.MODELS[0]['nvlinks'] == 18
