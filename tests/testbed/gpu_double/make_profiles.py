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

# ConnectX-7 functions (PCI 15b3:1021, MT2910 family, class 0x0207 InfiniBand).  Sources in REALITY.md:
# - the SW_MNG bridge ("LPF") VPD is the DGX B200 capture in siderolabs/extensions
#   nvidia-fabricmanager-wrapper/fixtures/dgxb200-lspci (05:00.0, mlx5_0; ibstat: MT4129, FW 28.42.1274,
#   node GUID 0xe09d730300e400e8);
# - two ports, each one full PF and one limited PF (LPF, VPD SMDL=SW_MNG): the fabric manager user guide as
#   quoted in siderolabs/extensions nvswitch.go.  The other functions' bus ids, serials and GUIDs are guesses;
#   the full PFs' VPD is the LPF's without SMDL=SW_MNG (guess);
# - the compute NICs carry a real CX-7 adapter VPD (MCX755106AS-HEAT lspci capture); bus ids, serials, GUIDs
#   and the subsystem id are guesses.
LPF_PRODUCT = 'Nvidia ConnectX-7 mezz internal for Nvidia Umbriel system'
NIC_PRODUCT = ('NVIDIA ConnectX-7 Adapter Card, 200GbE / NDR200, Dual-port QSFP112, PCIe 5.0x16 with x16 PCIe '
               'extension option, Crypto Disabled, Secure Boot Enabled')


def _bridge(bus_id, serial, uuid, guid, sw_mng):
    va = 'MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:{0}MODL=C7010Z'.format('SMDL=SW_MNG:' if sw_mng else '')
    return {'bus_id': bus_id, 'device_id': '0x1021', 'class': '0x020700', 'subsystem_device': '0x0087',
            'sw_mng': sw_mng, 'bridge': True, 'hca_type': 'MT4129', 'fw_ver': '28.42.1274', 'node_guid': guid,
            'vpd': {'product': LPF_PRODUCT, 'reserved': 2, 'fields': [
                ['PN', '692-9X760-00SE-S00'], ['EC', 'A4'], ['V2', '692-9X760-00SE-S00'], ['SN', serial],
                ['V3', uuid], ['VA', va], ['V0', 'PCIeGen4 x2'],
                ['VU', '{0}MLNXS0D0F{1}'.format(serial, bus_id[-1])]]}}


B200_BRIDGE = [
    _bridge('0000:05:00.0', 'MT2503603H5V', '96375e6109d7ef118000e09d73e400e8', 'e09d:7303:00e4:00e8', True),
    _bridge('0000:05:00.1', 'MT2503603H5V', '96375e6109d7ef118000e09d73e400e9', 'e09d:7303:00e4:00e9', False),
    _bridge('0000:06:00.0', 'MT2503603H6A', '96375e6109d7ef118000e09d73e401f0', 'e09d:7303:00e4:01f0', True),
    _bridge('0000:06:00.1', 'MT2503603H6A', '96375e6109d7ef118000e09d73e401f1', 'e09d:7303:00e4:01f1', False),
]


def _nic(n, bus):
    serial = 'MT24216006{0:02X}'.format(0xA0 + n)
    return {'bus_id': '0000:{0:02x}:00.0'.format(bus), 'device_id': '0x1021', 'class': '0x020700',
            'subsystem_device': '0x0026', 'sw_mng': False, 'hca_type': 'MT4129', 'fw_ver': '28.42.1274',
            'node_guid': '9c63:c003:00d4:{0:04x}'.format(0x2000 + n),
            'vpd': {'product': NIC_PRODUCT, 'reserved': 1, 'fields': [
                ['PN', 'MCX755106AS-HEAT'], ['EC', 'A8'], ['V2', 'MCX755106AS-HEAT'], ['SN', serial],
                ['V3', '74173d198917ef1180009c63c0d4{0:04x}'.format(0x2000 + n)],
                ['VA', 'MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX755106A'], ['V0', 'PCIeGen5 x16'],
                ['VU', serial + 'MLNXS0D0F0']]}}


COMPUTE_NICS = [_nic(n, bus) for n, bus in enumerate((0x18, 0x2a, 0x3b, 0x4c, 0x9a, 0xab, 0xbb, 0xdb))]
# Grace-Blackwell compute tray: one NIC per GPU behind the Grace CPUs (bus ids a guess; GB300 trays carry ConnectX-8
# in reality, modelled as the same ConnectX-7 - a guess, see REALITY.md).
GRACE_NICS = [_nic(n, bus) for n, bus in enumerate((0x01, 0x02, 0x03, 0x04))]

# nvidia-smi topo -m (lib/topo_double.py): NVLinks per GPU pair and the CPU/NUMA columns, from the captures named in
# REALITY.md (HGX H100: stas00/ml-engineering; HGX B200: vllm-project/vllm#24513; GB200: sgl-project/sglang#11208,
# whose GPU3 row is cut off in the copy found: its GPU NUMA ID 26 is a guess; H200 and GB300: their siblings', a guess).
TOPO_H100 = {'cpu_affinity': ['0-51,104-155', '52-103,156-207'], 'numa_affinity': ['0', '1']}
TOPO_B200 = {'cpu_affinity': ['0-55,112-167', '56-111,168-223'], 'numa_affinity': ['0', '1']}
TOPO_GRACE = {'cpu_affinity': ['0-71', '72-143'], 'numa_affinity': ['0,3-9,11-17', '1,19-25,27-33'],
              'gpu_numa_node': [0, 0, 1, 1], 'gpu_numa_id': [2, 10, 18, 26], 'grace': True}

# nvidia-smi nvlink -s speed per link (GB/s) and the figures of the performance doubles (lib/perf_double.py), with
# their sources in REALITY.md ("Performance tools"): allreduce_busbw_gbps is the bus bandwidth all_reduce_perf
# reaches at large sizes on one node; h2d/d2h per GPU and d2d_read per GPU pair are nvbandwidth's copy-engine cells.
NVLINK_GBPS = {'hopper': 26.562, 'nvlink5': 53.125}
PERF = {
    'hgx-h100-8gpu': {'allreduce_busbw_gbps': 481.0, 'h2d_gbps': 51.0, 'd2h_gbps': 52.0, 'd2d_read_gbps': 371.0},
    'hgx-h200-8gpu': {'allreduce_busbw_gbps': 481.0, 'h2d_gbps': 52.0, 'd2h_gbps': 52.0, 'd2d_read_gbps': 371.0},
    'hgx-b200-8gpu': {'allreduce_busbw_gbps': 820.0, 'h2d_gbps': 55.0, 'd2h_gbps': 55.0, 'd2d_read_gbps': 740.0},
    'gb200-4gpu': {'allreduce_busbw_gbps': 682.0, 'h2d_gbps': 201.0, 'd2h_gbps': 193.0, 'd2d_read_gbps': 770.0},
    'gb300-4gpu': {'allreduce_busbw_gbps': 682.0, 'h2d_gbps': 201.0, 'd2h_gbps': 193.0, 'd2d_read_gbps': 770.0},
}

DEFS = {
    'hgx-b200-8gpu': {
        'template': 'b200-8gpu_k8s-test-infra.xml',
        'template_overrides': [],
        # NVLink 5: the NVSwitch ASICs are not host PCI devices; the baseboard's ConnectX-7 bridge shows instead
        # (see CONNECTX below and REALITY.md).
        'nvswitches': [],
        'connectx': B200_BRIDGE + COMPUTE_NICS,
        'needs_nvlsm': True,
        'nvlinks': 18, 'topology': TOPO_B200, 'fabric': None,
    },
    'hgx-h100-8gpu': {
        'template': 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml',
        'template_overrides': [],
        'nvswitches': [{'bus_id': '0000:{0:02x}:00.0'.format(b), 'device_id': '0x22a3'} for b in (5, 6, 7, 8)],
        'connectx': COMPUTE_NICS,
        'needs_nvlsm': False,
        'nvlinks': 18, 'topology': TOPO_H100, 'fabric': None,
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
        'connectx': COMPUTE_NICS,
        'needs_nvlsm': False,
        'nvlinks': 18, 'topology': TOPO_H100, 'fabric': None,
    },
}


# GB200/GB300 NVL72 compute trays (R23): no local NVSwitch, no SW_MNG bridge, so fabric manager must not run; the
# NVLink switch trays register the GPUs ('switch-trays': fabric Completed/Success with the capture's clique id).
DEFS['gb200-4gpu'] = {
    'template': 'gb200-4gpu-arm64_k8s-test-infra.xml',
    'template_overrides': [],
    'nvswitches': [],
    'connectx': GRACE_NICS,
    'needs_nvlsm': False,
    'nvlinks': 18, 'topology': TOPO_GRACE, 'fabric': 'switch-trays',
}
DEFS['gb300-4gpu'] = dict(DEFS['gb200-4gpu'], template='gb300-4gpu_k8s-test-infra.xml')


def prof_nvlink5(spec):
    """Blackwell boards (B200, GB200, GB300) have NVLink 5; Hopper NVLink 4."""
    return spec['template'].startswith(('b200', 'gb200', 'gb300'))


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
        'pcie': {'gen_max': int(first(b, 'max_link_gen', 'pcie_gen')),
                 'width_max': int(first(b, 'max_link_width', 'link_widths').rstrip('x'))},
        'nvswitches': spec['nvswitches'],
        'connectx': spec['connectx'],
        'needs_nvlsm': spec['needs_nvlsm'],
        'nvlinks': spec['nvlinks'],
        'topology': spec['topology'],
        'fabric': spec['fabric'],
        'nvlink_gbps': NVLINK_GBPS['nvlink5' if prof_nvlink5(spec) else 'hopper'],
        'perf': PERF[name],
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
