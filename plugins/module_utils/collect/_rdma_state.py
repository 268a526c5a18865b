# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""``kernel_state.rdma``: the GPUDirect RDMA path as gpu_node_facts reads it in its one round trip: the ConnectX
functions on the PCI bus, whether ``nvidia_peermem`` is loaded, the peer-memory symbols of the RDMA stack
(``/proc/kallsyms``), the kernel command line and boot loader arguments, the IOMMU state and, when there is a
ConnectX device, the PCIe bridges of ``lspci -D -vvv`` with their ACS control bits.

The parsers are parsers/_rdma_path.py; the rules that judge the result are rules/_rdma.py.  No Ansible import;
Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._rdma_path import (
    DMABUF_SYMBOLS,
    PEER_MEMORY_SYMBOLS,
    PEERMEM_MODULE,
    device_kind,
    kallsyms_symbols,
    parse_bls_options,
    parse_default_grub,
    parse_lspci_vvv,
    parse_modinfo_depends,
    virtualization,
)

MELLANOX_VENDOR = '0x15b3'
LSPCI_ARGS = ('-D', '-vvv')


def read_boot_args(root):
    """What the boot loader gives the kernels that boot next: ``{bls: {entry file: options}, grub_cmdline_linux}``
    (``bls`` without the rescue entries; ``grub_cmdline_linux`` None without /etc/default/grub)."""
    bls = {}
    for path in sorted(glob.glob(os.path.join(root, 'boot/loader/entries/*.conf'))):
        if 'rescue' in os.path.basename(path):
            continue
        bls[os.path.basename(path)] = parse_bls_options(_read(path))
    grub = _read(os.path.join(root, 'etc/default/grub'))
    values = parse_default_grub(grub) if grub is not None else None
    return {'bls': bls, 'grub_cmdline_linux': None if values is None else values.get('GRUB_CMDLINE_LINUX', ''),
            'grub_cmdline_linux_default': None if values is None else values.get('GRUB_CMDLINE_LINUX_DEFAULT', '')}


# ---------------------------------------------------------------- the collector

def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def scan_connectx(root, exclude=()):
    """Bus ids of the Mellanox/NVIDIA networking functions in sysfs (vendor 0x15b3), less ``exclude`` (the NVLink 5
    switch bridges, which share the device id)."""
    found = []
    for dev in sorted(glob.glob(os.path.join(root, 'sys/bus/pci/devices/*'))):
        vendor = (_read(os.path.join(dev, 'vendor')) or '').strip().lower()
        if vendor == MELLANOX_VENDOR and os.path.basename(dev) not in exclude:
            found.append(os.path.basename(dev))
    return found


def iommu_state(root, bus_ids):
    """``{groups, class, device_types}``: the number of IOMMU groups, the IOMMUs of /sys/class/iommu and the group
    type (``identity``, ``DMA``, ``DMA-FQ``...) of each of ``bus_ids`` that sits in a group."""
    groups_dir = os.path.join(root, 'sys/kernel/iommu_groups')
    try:
        groups = len(os.listdir(groups_dir))
    except (IOError, OSError):
        groups = 0
    try:
        units = sorted(os.listdir(os.path.join(root, 'sys/class/iommu')))
    except (IOError, OSError):
        units = []
    types = {}
    for bus in bus_ids:
        kind = _read(os.path.join(root, 'sys/bus/pci/devices', bus, 'iommu_group', 'type'))
        if kind and kind.strip():
            types[bus] = kind.strip()
    return {'groups': groups, 'class': units, 'device_types': types}


def read_kallsyms(root, wanted=PEER_MEMORY_SYMBOLS):
    """The names of ``wanted`` /proc/kallsyms defines; None when it cannot be read."""
    try:
        with open(os.path.join(root, 'proc/kallsyms')) as handle:
            return kallsyms_symbols(handle.read(), wanted)
    except (IOError, OSError):
        return None


def read_virtualization(module, root, run_status):
    """``{name, source}`` (rules/_rdma.virtualization): ``systemd-detect-virt --vm``, else the DMI names."""
    tool = module.get_bin_path('systemd-detect-virt') if root in ('/', '') else None
    rc = out = None
    if tool is not None:
        rc, out, _err = run_status(module, [tool, '--vm'])
    dmi = os.path.join(root, 'sys/class/dmi/id')
    return virtualization(rc, out, _read(os.path.join(dmi, 'sys_vendor')), _read(os.path.join(dmi, 'product_name')))


def read_peermem_module(module, run_status):
    """``{found, depends}`` of the nvidia_peermem module of the running kernel (``modinfo -F depends``)."""
    modinfo = module.get_bin_path('modinfo')
    if modinfo is None:
        return {'found': None, 'depends': None}
    rc, out, err = run_status(module, [modinfo, '-F', 'depends', PEERMEM_MODULE])
    found, depends = parse_modinfo_depends(rc, out, err)
    return {'found': found, 'depends': depends}


def relevant_devices(devices):
    """The part of lspci's devices the rules read: bridges (bus ranges, port type, ACS) and GPU/NIC functions."""
    keep = []
    for dev in devices:
        if dev.get('secondary') is not None or device_kind(dev):
            kept = dict((k, dev[k]) for k in ('bus_id', 'class', 'port', 'secondary', 'subordinate', 'acs_ctl',
                                              'denied'))
            kept['kind'] = device_kind(dev)
            keep.append(kept)
    return keep


def collect_rdma_facts(module, root='/', run_status=None, gpu_bus_ids=(), exclude=()):
    """``kernel_state.rdma``. Only a node with ConnectX devices pays for lspci and /proc/kallsyms."""
    connectx = scan_connectx(root, exclude)
    peermem = os.path.isdir(os.path.join(root, 'sys/module', PEERMEM_MODULE))
    cmdline = (_read(os.path.join(root, 'proc/cmdline')) or '').strip()
    facts = {'connectx': connectx, 'peermem_loaded': peermem, 'cmdline': cmdline,
             'iommu': iommu_state(root, list(gpu_bus_ids) + connectx), 'peer_symbols': None, 'bridges': None,
             'lspci_error': None, 'boot_args': read_boot_args(root), 'dmabuf_symbols': None,
             'peermem_module': None, 'virtualization': None}
    if not connectx:
        return facts
    if not peermem:
        found = read_kallsyms(root, PEER_MEMORY_SYMBOLS + DMABUF_SYMBOLS)
        if found is not None:
            facts['peer_symbols'] = [name for name in found if name in PEER_MEMORY_SYMBOLS]
            facts['dmabuf_symbols'] = [name for name in found if name in DMABUF_SYMBOLS]
    facts['virtualization'] = read_virtualization(module, root, run_status)
    if root not in ('/', ''):
        facts['lspci_error'] = 'lspci reads the running system only (root={0})'.format(root)
        return facts
    if not peermem:
        facts['peermem_module'] = read_peermem_module(module, run_status)
    lspci = module.get_bin_path('lspci', opt_dirs=['/usr/sbin', '/sbin', '/usr/bin'])
    if lspci is None:
        facts['lspci_error'] = 'lspci not found (install pciutils)'
        return facts
    rc, out, err = run_status(module, [lspci] + list(LSPCI_ARGS))
    if rc != 0:
        facts['lspci_error'] = 'rc={0}: {1}'.format(rc, (err or '').strip()[:300])
        return facts
    facts['bridges'] = relevant_devices(parse_lspci_vvv(out))
    return facts
