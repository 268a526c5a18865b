# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import (
    NvidiaSmiParseError,
    is_unavailable,
    normalize_bus_id,
    parse_nvsmi_xml,
    parse_number,
)

XML_DIR = os.path.join(FIXTURES, 'nvidia-smi-xml')


def load(name):
    with open(os.path.join(XML_DIR, name)) as handle:
        return handle.read()


# Expected values read from each file by hand/grep (not by this parser):
# (file, driver_version, attached_gpus, [(pci_bus_id, name, persistence_mode, memory_total_mib,
#   power_limit_w, default_power_limit_w, min_power_limit_w, max_power_limit_w), ...])
FIXTURE_TABLE = [
    ('a100-sxm4-1gpu_telegraf.xml', '535.54.03', 4, [
        ('00000000:01:00.0', 'NVIDIA A100-SXM4-80GB', False, 81920, 500.0, 500.0, 100.0, 500.0),
    ]),
    ('a100-sxm4-40gb-1gpu_k8s-test-infra.xml', '570.148.08', 1, [
        ('00000000:06:00.0', 'NVIDIA A100-SXM4-40GB', True, 40960, 400.0, 400.0, 100.0, 400.0),
    ]),
    ('a10g-1gpu_telegraf.xml', '515.105.01', 1, [
        ('00000000:00:1E.0', 'NVIDIA A10G', False, 23028, 300.0, 300.0, 100.0, 300.0),
    ]),
    ('b200-8gpu_k8s-test-infra.xml', '580.105.08', 8, [
        ('00000000:8F:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:90:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:96:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:97:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:C4:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:C5:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:CB:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
        ('00000000:CC:00.0', 'NVIDIA B200', False, 183359, 1000.0, 1000.0, 200.0, 1000.0),
    ]),
    ('gb200-4gpu-arm64_k8s-test-infra.xml', '580.173.02', 4, [
        ('00000000:29:00.0', 'NVIDIA GB200', True, 189471, 1200.0, 1200.0, 200.0, 1200.0),
        ('00000000:3F:00.0', 'NVIDIA GB200', True, 189471, 1200.0, 1200.0, 200.0, 1200.0),
        ('00000000:9C:00.0', 'NVIDIA GB200', True, 189471, 1200.0, 1200.0, 200.0, 1200.0),
        ('00000000:B2:00.0', 'NVIDIA GB200', True, 189471, 1200.0, 1200.0, 200.0, 1200.0),
    ]),
    ('gb300-4gpu_k8s-test-infra.xml', '580.173.02', 4, [
        ('00000008:06:00.0', 'NVIDIA GB300', True, 284208, 1400.0, 1400.0, 200.0, 1400.0),
        ('00000009:06:00.0', 'NVIDIA GB300', True, 284208, 1400.0, 1400.0, 200.0, 1400.0),
        ('00000018:06:00.0', 'NVIDIA GB300', True, 284208, 1400.0, 1400.0, 200.0, 1400.0),
        ('00000019:06:00.0', 'NVIDIA GB300', True, 284208, 1400.0, 1400.0, 200.0, 1400.0),
    ]),
    ('gtx-1660ti-1gpu_telegraf.xml', '418.43', 1, [
        ('00000000:43:00.0', 'Graphics Device', False, 5912, 130.0, 130.0, 70.0, 130.0),
    ]),
    ('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml', '580.105.08', 8, [
        ('00000000:53:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:64:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:75:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:86:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:97:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:A8:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:B9:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
        ('00000000:CA:00.0', 'NVIDIA H100 80GB HBM3', True, 81559, 700.0, 700.0, 200.0, 700.0),
    ]),
    ('l40s-1gpu_k8s-test-infra.xml', '595.91.07', 1, [
        ('00000000:30:00.0', 'NVIDIA L40S', True, 46068, 350.0, 350.0, 100.0, 350.0),
    ]),
    ('quadro-p2000-1gpu_telegraf.xml', '525.125.06', 1, [
        ('00000000:17:00.0', 'Quadro P2000', True, 5120, 75.0, 75.0, 75.0, 75.0),
    ]),
    ('rtx-2070-2gpu_telegraf.xml', '590.44.01', 2, [
        ('00000000:01:00.0', 'NVIDIA GeForce RTX 2070', True, 8192, 175.0, 175.0, 125.0, 200.0),
        ('00000000:02:00.0', 'NVIDIA GeForce RTX 2070', True, 8192, 175.0, 175.0, 125.0, 200.0),
    ]),
    ('rtx-2080-windows-1gpu_netdata.xml', '516.59', 1, [
        ('00000000:0A:00.0', 'NVIDIA GeForce RTX 2080', None, 8192, 275.0, 275.0, 105.0, 350.0),
    ]),
    ('rtx-3060-1gpu_telegraf.xml', '570.124.04', 1, [
        ('00000000:2D:00.0', 'NVIDIA GeForce RTX 3060', True, 12288, 170.0, 170.0, 100.0, 190.0),
    ]),
    ('rtx-3080-1gpu-v13_telegraf.xml', '595.58.03', 1, [
        ('00000000:0C:00.0', 'NVIDIA GeForce RTX 3080', False, 10240, 320.0, 320.0, 100.0, 336.0),
    ]),
    ('rtx-3090-1gpu-v12_telegraf.xml', '525.147.05', 1, [
        ('00000000:00:10.0', 'NVIDIA GeForce RTX 3090', True, 24576, 200.0, 350.0, 100.0, 375.0),
    ]),
    ('rtx-3090-1gpu-v13_telegraf.xml', '590.44.01', 1, [
        ('00000000:09:00.0', 'NVIDIA GeForce RTX 3090', True, 24576, 350.0, 350.0, 100.0, 480.0),
    ]),
    ('rtx-4000-sff-ada-1gpu_telegraf.xml', '595.84', 1, [
        ('00000000:06:00.0', 'NVIDIA RTX 4000 SFF Ada Generation', True, 20475, 70.0, 70.0, 30.0, 70.0),
    ]),
    ('rtx-4090-1gpu_netdata.xml', '535.86.05', 1, [
        ('00000000:84:00.0', 'NVIDIA GeForce RTX 4090', True, 24564, 450.0, 450.0, 10.0, 600.0),
    ]),
    ('rtx-a5000-2gpu_telegraf.xml', '590.44.01', 2, [
        ('00000000:81:00.0', 'NVIDIA RTX A5000', True, 24564, 230.0, 230.0, 100.0, 230.0),
        ('00000000:C1:00.0', 'NVIDIA RTX A5000', True, 24564, 230.0, 230.0, 100.0, 230.0),
    ]),
    ('tesla-k80-4gpu_pai.xml', '430.26', 4, [
        ('00001580:00:00.0', 'Tesla K80', False, 11441, 149.0, 149.0, 100.0, 175.0),
        ('00002DF7:00:00.0', 'Tesla K80', False, 11441, 149.0, 149.0, 100.0, 175.0),
        ('00004968:00:00.0', 'Tesla K80', False, 11441, 149.0, 149.0, 100.0, 175.0),
        ('0000F8D6:00:00.0', 'Tesla K80', False, 11441, 149.0, 149.0, 100.0, 175.0),
    ]),
    ('tesla-p100-pcie-1gpu_netdata.xml', '510.47.03', 1, [
        ('00000000:00:04.0', 'Tesla P100-PCIE-16GB', False, 16384, 250.0, 250.0, 125.0, 250.0),
    ]),
    ('tesla-t4-1gpu_k8s-test-infra.xml', '595.91.07', 1, [
        ('00000000:00:1E.0', 'Tesla T4', True, 15360, 70.0, 70.0, 60.0, 70.0),
    ]),
    ('tesla-t4-1gpu_telegraf.xml', '515.105.01', 1, [
        ('00000000:00:1E.0', 'Tesla T4', False, 15360, 70.0, 70.0, 60.0, 70.0),
    ]),
    ('tesla-v100-pcie-1gpu_datakit.xml', '460.39', 1, [
        ('00000000:21:01.0', 'Tesla V100-PCIE-32GB', False, 32510, 250.0, 250.0, 100.0, 250.0),
    ]),
]


def test_table_covers_every_xml_fixture():
    assert sorted(row[0] for row in FIXTURE_TABLE) == sorted(
        name for name in os.listdir(XML_DIR) if name.endswith('.xml'))


@pytest.mark.parametrize('name, driver, attached, gpus', FIXTURE_TABLE, ids=[row[0] for row in FIXTURE_TABLE])
def test_every_fixture(name, driver, attached, gpus):
    facts = parse_nvsmi_xml(load(name))
    assert facts['driver_version'] == driver
    assert facts['attached_gpus'] == attached
    assert facts['gpu_blocks'] == len(gpus)
    got = [(g['pci_bus_id'], g['name'], g['persistence_mode'], g['memory_total_mib'], g['power_limit_w'],
            g['default_power_limit_w'], g['min_power_limit_w'], g['max_power_limit_w']) for g in facts['gpus']]
    assert got == gpus
    assert [g['index'] for g in facts['gpus']] == list(range(len(gpus)))


# (file, dtd_version, cuda_version, architecture, pci_device_id, mig_mode, compute_mode, ecc current,
#  applications_clocks, default_applications_clocks, applications_clocks_deprecated, max_clocks)
DETAIL_TABLE = [
    ('b200-8gpu_k8s-test-infra.xml', 13, '13.0', 'Blackwell', '0x2901', 'Disabled', 'Default', 'Enabled',
     {'graphics_mhz': 1965, 'mem_mhz': 3996}, {'graphics_mhz': 1965, 'mem_mhz': 3996}, False,
     {'graphics_mhz': 1965, 'sm_mhz': 1965, 'mem_mhz': 3996}),
    ('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml', 13, '13.0', 'Hopper', '0x2330', 'Disabled', 'Default', 'Enabled',
     {'graphics_mhz': 1980, 'mem_mhz': 2619}, {'graphics_mhz': 1980, 'mem_mhz': 2619}, False,
     {'graphics_mhz': 1980, 'sm_mhz': 1980, 'mem_mhz': 2619}),
    ('gb200-4gpu-arm64_k8s-test-infra.xml', 13, '13.0', 'Blackwell', '0x2941', 'Disabled', 'Default', 'Enabled',
     {'graphics_mhz': 2062, 'mem_mhz': 3996}, {'graphics_mhz': 2062, 'mem_mhz': 3996}, False,
     {'graphics_mhz': 2062, 'sm_mhz': 2062, 'mem_mhz': 3996}),
    ('l40s-1gpu_k8s-test-infra.xml', 13, '13.2', 'Ada Lovelace', '0x26b9', None, 'Default', 'Enabled',
     None, None, True, {'graphics_mhz': 2520, 'sm_mhz': 2520, 'mem_mhz': 9001}),
    ('a100-sxm4-1gpu_telegraf.xml', 12, '12.2', 'Ampere', '0x20b2', 'Enabled', 'Default', 'Enabled',
     {'graphics_mhz': 1275, 'mem_mhz': 1593}, {'graphics_mhz': 1275, 'mem_mhz': 1593}, False,
     {'graphics_mhz': 1410, 'sm_mhz': 1410, 'mem_mhz': 1593}),
    ('gtx-1660ti-1gpu_telegraf.xml', None, '10.1', None, '0x2184', None, 'Default', None,
     None, None, False, {'graphics_mhz': 2145, 'sm_mhz': 2145, 'mem_mhz': 4001}),
    ('tesla-k80-4gpu_pai.xml', 10, None, None, '0x102d', None, 'Default', 'Enabled',
     {'graphics_mhz': 562, 'mem_mhz': 2505}, {'graphics_mhz': 562, 'mem_mhz': 2505}, False,
     {'graphics_mhz': 875, 'sm_mhz': 875, 'mem_mhz': 2505}),
    ('rtx-3090-1gpu-v12_telegraf.xml', 12, '12.0', 'Ampere', None, None, 'Default', None,
     None, None, False, {'graphics_mhz': 2100, 'sm_mhz': 2100, 'mem_mhz': 9751}),
    ('tesla-v100-pcie-1gpu_datakit.xml', 11, '11.2', None, '0x1db6', None, 'Default', 'Enabled',
     {'graphics_mhz': 1230, 'mem_mhz': 877}, {'graphics_mhz': 1230, 'mem_mhz': 877}, False,
     {'graphics_mhz': 1380, 'sm_mhz': 1380, 'mem_mhz': 877}),
]


@pytest.mark.parametrize('row', DETAIL_TABLE, ids=[row[0] for row in DETAIL_TABLE])
def test_details_first_gpu(row):
    name, dtd, cuda, arch, device_id, mig, compute, ecc, app, default_app, deprecated, max_clocks = row
    facts = parse_nvsmi_xml(load(name))
    gpu = facts['gpus'][0]
    assert facts['dtd_version'] == dtd
    assert facts['cuda_version'] == cuda
    assert (gpu['architecture'], gpu['pci_device_id'], gpu['mig_mode'], gpu['compute_mode']) == (
        arch, device_id, mig, compute)
    assert gpu['ecc']['current'] == ecc
    assert gpu['applications_clocks'] == app
    assert gpu['default_applications_clocks'] == default_app
    assert gpu['applications_clocks_deprecated'] is deprecated
    assert gpu['max_clocks'] == max_clocks


def test_b200_power_fabric_rows_and_supported_clocks():
    facts = parse_nvsmi_xml(load('b200-8gpu_k8s-test-infra.xml'))
    gpu = facts['gpus'][0]
    assert gpu['uuid'] == 'GPU-00000000-0000-0000-0000-000000000000'
    assert gpu['pci_vendor_id'] == '0x10de'
    assert gpu['enforced_power_limit_w'] == 1000.0
    assert gpu['power_draw_w'] == 195.68
    assert gpu['clocks'] == {'graphics_mhz': 120, 'sm_mhz': 120, 'mem_mhz': 3996, 'video_mhz': 600}
    assert gpu['fabric'] == {'state': 'Completed', 'status': 'Success', 'clique_id': '0',
                             'cluster_uuid': '00000000-0000-0000-0000-000000000000', 'health': 'Healthy'}
    assert gpu['remapped_rows'] == {'pending': False, 'failure': False, 'correctable': 0, 'uncorrectable': 0}
    # B200 reports every retired-page field as N/A (row remapping replaced page retirement).
    assert gpu['retired_pages'] is None
    assert gpu['ecc'] == {'current': 'Enabled', 'pending': 'Enabled', 'volatile_uncorrectable': 0,
                          'aggregate_uncorrectable': 0}
    assert sorted(gpu['supported_clocks'], key=int) == ['3402', '3996']
    assert gpu['supported_clocks']['3996'][:3] == [1965, 1957, 1950]
    assert gpu['mig_devices'] == []
    assert gpu['clocks_event_reasons']['gpu_idle'] is True
    assert gpu['clocks_event_reasons']['applications_clocks_setting'] is False
    assert gpu['temperature_c'] == 39


def test_supported_clocks_can_be_left_out():
    facts = parse_nvsmi_xml(load('b200-8gpu_k8s-test-infra.xml'), include_supported_clocks=False)
    assert [g['supported_clocks'] for g in facts['gpus']] == [None] * 8


def test_supported_clocks_na_is_none():
    assert parse_nvsmi_xml(load('gtx-1660ti-1gpu_telegraf.xml'))['gpus'][0]['supported_clocks'] is None


def test_a100_mig_devices_and_trimmed_attached_count():
    facts = parse_nvsmi_xml(load('a100-sxm4-1gpu_telegraf.xml'))
    assert (facts['attached_gpus'], facts['gpu_blocks']) == (4, 1)
    gpu = facts['gpus'][0]
    assert (gpu['mig_mode'], gpu['mig_pending']) == ('Enabled', 'Enabled')
    assert [(d['index'], d['gpu_instance_id'], d['compute_instance_id'], d['multiprocessor_count'],
             d['memory_total_mib']) for d in gpu['mig_devices']] == [
        (0, 3, 0, 14, 19968), (1, 4, 0, 14, 19968), (2, 5, 0, 14, 19968), (3, 6, 0, 14, 19968)]
    assert gpu['memory_total_mib'] == 81920
    assert gpu['remapped_rows'] is None
    assert gpu['fabric'] is None


def test_k80_retired_pages_and_old_ecc_schema():
    facts = parse_nvsmi_xml(load('tesla-k80-4gpu_pai.xml'))
    gpu = facts['gpus'][0]
    assert gpu['retired_pages'] == {'pending': False, 'single_bit': 1, 'double_bit': 1}
    assert gpu['ecc'] == {'current': 'Enabled', 'pending': 'Enabled', 'volatile_uncorrectable': 0,
                          'aggregate_uncorrectable': 7}
    assert gpu['clocks_event_reasons'] is not None
    assert [g['retired_pages'] for g in facts['gpus'][1:]] == [
        {'pending': False, 'single_bit': 1, 'double_bit': 1},
        {'pending': False, 'single_bit': 0, 'double_bit': 0},
        {'pending': False, 'single_bit': 0, 'double_bit': 0}]


def test_gb200_uses_gpu_not_module_power_readings():
    gpu = parse_nvsmi_xml(load('gb200-4gpu-arm64_k8s-test-infra.xml'))['gpus'][0]
    assert (gpu['power_limit_w'], gpu['max_power_limit_w']) == (1200.0, 1200.0)
    assert gpu['fabric']['clique_id'] == '2'


def test_windows_persistence_na_is_none():
    gpu = parse_nvsmi_xml(load('rtx-2080-windows-1gpu_netdata.xml'))['gpus'][0]
    assert gpu['persistence_mode'] is None


def test_bytes_input():
    facts = parse_nvsmi_xml(load('tesla-t4-1gpu_telegraf.xml').encode('utf-8'))
    assert facts['gpus'][0]['name'] == 'Tesla T4'


B200 = None


def b200_text():
    global B200
    if B200 is None:
        B200 = load('b200-8gpu_k8s-test-infra.xml')
    return B200


MALFORMED = [
    ('empty', '', 'nvidia-smi XML is empty'),
    ('blank', '   \n', 'nvidia-smi XML is empty'),
    ('not-xml', 'not xml at all', 'nvidia-smi XML is not well-formed: syntax error: line 1, column 0'),
    ('json', '{"gpus": []}', 'nvidia-smi XML is not well-formed: not well-formed (invalid token): line 1, column 0'),
    ('unclosed', '<nvidia_smi_log><gpu id="x">', 'nvidia-smi XML is not well-formed: no element found: line 1, column 28'),
    ('truncated-b200', 'TRUNCATED', 'nvidia-smi XML is not well-formed: unclosed token: line 122, column 3'),
    ('wrong-root', '<?xml version="1.0" ?>\n<html><body/></html>',
     'expected root element <nvidia_smi_log> in nvidia-smi XML, found <html>'),
    ('gpu-without-id', '<nvidia_smi_log><gpu><product_name>X</product_name></gpu></nvidia_smi_log>',
     'gpu block 0: no id attribute and no <pci>/<pci_bus_id> element'),
    ('bad-unit', '<nvidia_smi_log><gpu id="00000000:01:00.0"><fb_memory_usage><total>80 GB</total>'
                 '</fb_memory_usage></gpu></nvidia_smi_log>',
     "GPU 0 (00000000:01:00.0) <fb_memory_usage/total>: expected a number in MiB, got '80 GB'"),
    ('entity', '<!DOCTYPE x [<!ENTITY a "b">]><nvidia_smi_log/>',
     'nvidia-smi XML must not declare entities (<!ENTITY found)'),
    ('kilowatts', 'KW', "GPU 0 (00000000:8F:00.0) <gpu_power_readings/max_power_limit>: expected a number in W, "
                        "got '1000.00 kW'"),
    ('bad-utf8', b'\xff\xfe', "nvidia-smi XML is not valid UTF-8: 'utf-8' codec can't decode byte 0xff in position 0: "
                              "invalid start byte"),
]


@pytest.mark.parametrize('case, text, message', MALFORMED, ids=[row[0] for row in MALFORMED])
def test_malformed(case, text, message):
    if text == 'TRUNCATED':
        text = b200_text()[:5000]
    elif text == 'KW':
        text = b200_text().replace('<max_power_limit>1000.00 W</max_power_limit>',
                                   '<max_power_limit>1000.00 kW</max_power_limit>', 1)
    with pytest.raises(NvidiaSmiParseError) as excinfo:
        parse_nvsmi_xml(text)
    assert str(excinfo.value) == message


def test_minimal_log_without_gpus():
    facts = parse_nvsmi_xml('<nvidia_smi_log><driver_version>580.95.05</driver_version>'
                            '<attached_gpus>0</attached_gpus></nvidia_smi_log>')
    assert facts == {'driver_version': '580.95.05', 'cuda_version': None, 'attached_gpus': 0, 'gpu_blocks': 0,
                     'dtd_version': None, 'timestamp': None, 'gpus': []}


@pytest.mark.parametrize('text, expected', [
    ('N/A', True), ('[N/A]', True), ('Not Supported', True), ('[Not Supported]', True),
    ('Insufficient Permissions', True), ('Requested functionality has been deprecated', True),
    ('Unknown Error', True), ('', True), ('700.00 W', False), ('0', False),
])
def test_is_unavailable(text, expected):
    assert is_unavailable(text) is expected


@pytest.mark.parametrize('text, units, kind, expected', [
    ('700.00 W', ('W',), float, 700.0),
    ('[N/A]', ('W',), float, None),
    ('Insufficient Permissions', ('W',), float, None),
    ('183359 MiB', ('MiB',), int, 183359),
    ('1965 MHz', ('MHz',), int, 1965),
    ('0', ('',), int, 0),
    ('-5 C', ('C',), int, -5),
    (None, ('W',), float, None),
])
def test_parse_number(text, units, kind, expected):
    assert parse_number(text, units, 'here', kind) == expected


@pytest.mark.parametrize('text, units, message', [
    ('700 mW', ('W',), "here: expected a number in W, got '700 mW'"),
    ('12x34', ('',), "here: expected a number, got '12x34'"),
    ('1.2.3 MHz', ('MHz',), "here: expected a number in MHz, got '1.2.3 MHz'"),
])
def test_parse_number_errors(text, units, message):
    with pytest.raises(NvidiaSmiParseError) as excinfo:
        parse_number(text, units, 'here')
    assert str(excinfo.value) == message


@pytest.mark.parametrize('given, expected', [
    ('00000000:8F:00.0', '00000000:8F:00.0'),
    ('0000:8f:00.0', '00000000:8F:00.0'),
    ('8F:00.0', '00000000:8F:00.0'),
    ('00001580:00:00.0', '00001580:00:00.0'),
    ('GPU-1234', None),
    ('8F:00', None),
])
def test_normalize_bus_id(given, expected):
    assert normalize_bus_id(given) == expected
