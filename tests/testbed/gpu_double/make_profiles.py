# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Regenerate profiles/*.json from the real captures in templates/ (run by hand, output committed).

Every number in a profile is read from a template file (after the profile's overrides), so the
double and the real capture cannot drift apart.  The H200 has no public XML capture: its profile
takes the H100 SXM XML as template and overrides the values that the H200 text capture
(nvidia_gpu_exporter bundle, driver 590.48.01) shows differently: name, PCI IDs, memory and
memory clocks.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))

DEFS = {
    'hgx-b200-8gpu': {
        'template': 'b200-8gpu_k8s-test-infra.xml',
        'template_overrides': [],
        # NVLink switch chips of the HGX baseboard; PCI device id modelled, not from a capture.
        'nvswitches': [{'bus_id': '0000:{0:02x}:00.0'.format(b), 'device_id': '0x2941'} for b in (0x05, 0x06)],
        'needs_nvlsm': True,
    },
    'hgx-h100-8gpu': {
        'template': 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml',
        'template_overrides': [],
        'nvswitches': [{'bus_id': '0000:{0:02x}:00.0'.format(b), 'device_id': '0x22a3'} for b in (5, 6, 7, 8)],
        'needs_nvlsm': False,
    },
    'hgx-h200-8gpu': {
        'template': 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml',
        'template_overrides': [
            ['<product_name>NVIDIA H100 80GB HBM3</product_name>', '<product_name>NVIDIA H200</product_name>'],
            ['<pci_device_id>233010DE</pci_device_id>', '<pci_device_id>233510DE</pci_device_id>'],
            ['<pci_sub_system_id>16C110DE</pci_sub_system_id>', '<pci_sub_system_id>18BE10DE</pci_sub_system_id>'],
            ['<total>81559 MiB</total>', '<total>143771 MiB</total>'],
            ['<mem_clock>2619 MHz</mem_clock>', '<mem_clock>3201 MHz</mem_clock>'],
            ['<value>2619 MHz</value>', '<value>3201 MHz</value>'],
        ],
        'nvswitches': [{'bus_id': '0000:{0:02x}:00.0'.format(b), 'device_id': '0x22a3'} for b in (5, 6, 7, 8)],
        'needs_nvlsm': False,
    },
}


def first(block, tag, scope=None):
    if scope:
        block = re.search(r'<{0}>(.*?)</{0}>'.format(scope), block, re.S).group(1)
    return re.search(r'<{0}>([^<]*)</{0}>'.format(tag), block).group(1)


def num(text):
    return float(text.split()[0])


def build(name, spec):
    with open(os.path.join(HERE, 'templates', spec['template'])) as f:
        text = f.read()
    blocks = re.split(r'(?m)^(?=\t<gpu id=")', text)[1:]
    gpus = []
    fixed = None
    for idx, block in enumerate(blocks):
        for old, new in spec['template_overrides']:
            block = block.replace(old, new)
        gpus.append({'index': idx, 'pci_bus_id': re.search(r'<gpu id="([^"]+)">', block).group(1),
                     'uuid': first(block, 'uuid')})
        if fixed is None:
            fixed = block
    b = fixed
    sup = {}
    for m in re.finditer(r'<supported_mem_clock>(.*?)</supported_mem_clock>', b, re.S):
        mem = first(m.group(1), 'value').split()[0]
        sup[mem] = [int(x) for x in re.findall(r'<supported_graphics_clock>(\d+) MHz<', m.group(1))]
    dev = first(b, 'pci_device_id')
    return {
        'name': name,
        'template': spec['template'],
        'template_overrides': spec['template_overrides'],
        'product_name': first(b, 'product_name'),
        'architecture': first(b, 'product_architecture'),
        'pci_device_id': '0x' + dev[:4].lower(),
        'pci_sub_system_id': '0x' + first(b, 'pci_sub_system_id'),
        'memory_total_mib': int(first(b, 'total', 'fb_memory_usage').split()[0]),
        'power': {'default_w': num(first(b, 'default_power_limit', 'gpu_power_readings')),
                  'min_w': num(first(b, 'min_power_limit', 'gpu_power_readings')),
                  'max_w': num(first(b, 'max_power_limit', 'gpu_power_readings'))},
        'idle_clocks': {'graphics_mhz': int(num(first(b, 'graphics_clock', 'clocks'))),
                        'mem_mhz': int(num(first(b, 'mem_clock', 'clocks')))},
        'default_applications_clocks': {
            'graphics_mhz': int(num(first(b, 'graphics_clock', 'default_applications_clocks'))),
            'mem_mhz': int(num(first(b, 'mem_clock', 'default_applications_clocks')))},
        'max_clocks': {'graphics_mhz': int(num(first(b, 'graphics_clock', 'max_clocks'))),
                       'sm_mhz': int(num(first(b, 'sm_clock', 'max_clocks'))),
                       'mem_mhz': int(num(first(b, 'mem_clock', 'max_clocks')))},
        'supported_clocks': sup,
        'nvswitches': spec['nvswitches'],
        'needs_nvlsm': spec['needs_nvlsm'],
        'unsupported': [],
        'gpus': gpus,
    }


def main():
    for name, spec in sorted(DEFS.items()):
        prof = build(name, spec)
        with open(os.path.join(HERE, 'profiles', name + '.json'), 'w') as f:
            json.dump(prof, f, indent=1, sort_keys=True)
            f.write('\n')
        print('{0}: {1} GPUs, {2}'.format(name, len(prof['gpus']), prof['product_name']))


if __name__ == '__main__':
    main()
