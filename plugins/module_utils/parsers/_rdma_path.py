# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Parsers of what the gather reads for the GPUDirect RDMA path: ``lspci -vvv`` (devices, bridges, ACS bits),
/etc/default/grub and Boot Loader Specification options, /proc/kallsyms (the peer-memory and DMA-BUF symbols),
``modinfo -F depends nvidia_peermem``, ``systemd-detect-virt --vm`` and the DMI names of a virtual machine, and the
name of the nvidia_peermem module.  The ACS boot script (roles/rdma/files/nodeprep-pci-acs) runs this file on the
node too.  The kernel command line's IOMMU words are parsers/_kernel_cmdline.py.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

PEERMEM_MODULE = 'nvidia_peermem'
# The peer-memory API nvidia_peermem links against (MLNX_OFED / DOCA-OFED ib_core); without it modprobe fails with
# "Unknown symbol ib_register_peer_memory_client".
PEER_MEMORY_SYMBOLS = ('ib_register_peer_memory_client', 'ib_unregister_peer_memory_client')
# The RDMA core's DMA-BUF memory registration (ib_core, Linux 5.12 and later; MLNX_OFED/DOCA-OFED carry it too): a
# stack without it cannot register GPU memory through DMA-BUF.
DMABUF_SYMBOLS = ('ib_umem_dmabuf_get',)
# The module nvidia_peermem links against when it was built with the peer-memory API (ib_core exports
# ib_register_peer_memory_client); built without it, its init returns -EINVAL and it depends on no RDMA module.
PEERMEM_RDMA_DEPENDENCY = 'ib_core'
# Vendor and product names of virtual machines in /sys/class/dmi/id (systemd src/basic/virt.c, its DMI table):
# ``{prefix of sys_vendor or product_name: the name systemd-detect-virt prints}``.
DMI_VM_NAMES = (
    ('KVM', 'kvm'), ('OpenStack', 'kvm'), ('KubeVirt', 'kvm'), ('QEMU', 'qemu'), ('VMware', 'vmware'),
    ('VMW', 'vmware'), ('innotek GmbH', 'oracle'), ('VirtualBox', 'oracle'), ('Xen', 'xen'), ('Bochs', 'bochs'),
    ('Parallels', 'parallels'), ('BHYVE', 'bhyve'), ('Hyper-V', 'microsoft'), ('Apple Virtualization', 'apple'),
)
ACS_FLAGS = ('SrcValid', 'TransBlk', 'ReqRedir', 'CmpltRedir', 'UpstreamFwd', 'EgressCtrl', 'DirectTrans')
GPU_CLASSES = ('3D controller', 'VGA compatible controller')
NIC_CLASSES = ('Ethernet controller', 'Infiniband controller', 'Network controller')


# ---------------------------------------------------------------- parsers

_HEADER_RE = re.compile(r'^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+([^:]+?):\s*(.*)$')
_BUS_RE = re.compile(r'Bus:\s+primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)')
_EXPRESS_RE = re.compile(r'Capabilities:\s+\[[0-9a-fA-F]+\]\s+Express\s+(?:\(v\d+\)\s+)?(.+?)(?:\s+\(Slot[+-]\))?,')
_FLAG_RE = re.compile(r'([A-Za-z]+)([+-])')
_VENDOR_RE = dict((vendor, re.compile(r'(?:\[|\bDevice ){0}:[0-9a-fA-F]{{4}}'.format(vendor)))
                  for vendor in ('10de', '15b3'))


def bus_id(domain, bus, device, function):
    """The sysfs spelling of a PCI address (``0000:17:01.0``)."""
    return '{0:04x}:{1:02x}:{2:02x}.{3}'.format(int(domain or '0', 16), int(bus, 16), int(device, 16), function)


def parse_acs_flags(text):
    """``{flag: bool}`` from the words of an ``ACSCap:``/``ACSCtl:`` line (``SrcValid+ TransBlk- ...``)."""
    flags = {}
    for name, sign in _FLAG_RE.findall(text or ''):
        if name in ACS_FLAGS:
            flags[name] = sign == '+'
    return flags


def parse_lspci_vvv(text):
    """Devices of ``lspci -vvv`` (with or without ``-D``/``-nn``), in the order printed.

    Each is ``{bus_id, class, description, port, secondary, subordinate, acs_cap, acs_ctl, denied}``: ``port`` is
    the PCI Express device/port type lspci names (``Downstream Port``, ``Root Port``, ``Upstream Port``,
    ``Endpoint``, ...; None without an Express capability), ``secondary``/``subordinate`` the bus range behind a
    bridge (ints; None for an endpoint), ``acs_cap``/``acs_ctl`` the ACS bits (None without an ACS capability),
    ``denied`` true when lspci could not read the capabilities (not root).
    """
    devices = []
    current = None
    for raw in (text or '').splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if not line[0].isspace():
            match = _HEADER_RE.match(line)
            if not match:
                current = None
                continue
            domain, bus, dev, func, klass, desc = match.groups()
            klass = re.sub(r'\s*\[[0-9a-fA-F]{4}\]$', '', klass.strip())
            current = {'bus_id': bus_id(domain, bus, dev, func), 'class': klass, 'description': desc.strip(),
                       'port': None, 'secondary': None, 'subordinate': None, 'acs_cap': None, 'acs_ctl': None,
                       'denied': False}
            devices.append(current)
            continue
        if current is None:
            continue
        stripped = line.strip()
        match = _BUS_RE.search(stripped)
        if match:
            current['secondary'] = int(match.group(2), 16)
            current['subordinate'] = int(match.group(3), 16)
            continue
        match = _EXPRESS_RE.search(stripped)
        if match:
            current['port'] = match.group(1).strip()
            continue
        if stripped.startswith('Capabilities: <access denied>'):
            current['denied'] = True
        elif stripped.startswith('ACSCap:'):
            current['acs_cap'] = parse_acs_flags(stripped[len('ACSCap:'):])
        elif stripped.startswith('ACSCtl:'):
            current['acs_ctl'] = parse_acs_flags(stripped[len('ACSCtl:'):])
    return devices


def device_kind(device):
    """``gpu`` (an NVIDIA display/3D function), ``nic`` (a Mellanox/NVIDIA networking function) or None."""
    desc = device.get('description') or ''
    klass = device.get('class') or ''
    # lspci names the vendor from pci.ids; without that database it prints the ids (``Device 10de:2330``)
    if klass in GPU_CLASSES and ('NVIDIA' in desc or _VENDOR_RE['10de'].search(desc)):
        return 'gpu'
    if klass in NIC_CLASSES and ('Mellanox' in desc or _VENDOR_RE['15b3'].search(desc)):
        return 'nic'
    return None


def kallsyms_symbols(text, wanted=PEER_MEMORY_SYMBOLS):
    """The names of ``wanted`` that ``/proc/kallsyms`` (its text: ``addr type name[\t[module]]`` lines) defines.

    A substring search per name over the whole text: /proc/kallsyms has over 100 000 lines, and a line-by-line scan
    in Python costs most of a second on a node that lacks the symbol (measured: 0.7-0.8 s for 122 000 lines).
    """
    found = []
    for name in wanted:
        if re.search(r' {0}(?:\t|\n|$)'.format(re.escape(name)), text or ''):
            found.append(name)
    return sorted(found)


def parse_modinfo_depends(rc, out, err=''):
    """``modinfo -F depends nvidia_peermem``: ``(found, depends)``: ``found`` False when modinfo says the module is
    not there (rc 1, "not found"), None when the answer cannot be read; ``depends`` the module names (a list, empty
    for a module that depends on none), None unless found."""
    if rc == 0:
        line = (out or '').strip().splitlines()
        names = line[0].strip() if line else ''
        return True, [name.strip() for name in names.split(',') if name.strip()]
    if rc == 1 and re.search(r'Module \S+ not found', (err or '') + (out or '')):
        return False, None
    return None, None


def parse_detect_virt(rc, out):
    """``systemd-detect-virt --vm``: the virtual machine's name (``kvm``, ``vmware``...), ``none`` on bare metal
    (it prints ``none`` and exits non-zero), None when the answer cannot be read (not installed, other errors)."""
    word = (out or '').strip().split()
    word = word[0] if word else ''
    if rc == 0 and word and word != 'none':
        return word
    if word == 'none':
        return 'none'
    return None


def dmi_virtualization(sys_vendor, product_name):
    """The virtual machine /sys/class/dmi/id names (``sys_vendor``, ``product_name``), ``none`` when both are read
    and name none, None when neither could be read."""
    if sys_vendor is None and product_name is None:
        return None
    for text in (sys_vendor or '', product_name or ''):
        for prefix, name in DMI_VM_NAMES:
            if text.strip().startswith(prefix):
                return name
    if (sys_vendor or '').strip().startswith('Microsoft Corporation') and \
            (product_name or '').strip() == 'Virtual Machine':
        return 'microsoft'
    return 'none'


def virtualization(detect_rc=None, detect_out=None, sys_vendor=None, product_name=None):
    """Whether the node is a virtual machine: ``{name, source}`` from ``systemd-detect-virt --vm`` (its exit status
    and output; ``detect_rc`` None when it could not run), else from the DMI names; ``name`` None when neither
    answers, ``none`` on bare metal."""
    name = parse_detect_virt(detect_rc, detect_out) if detect_rc is not None else None
    if name is not None:
        return {'name': name, 'source': 'systemd-detect-virt --vm'}
    name = dmi_virtualization(sys_vendor, product_name)
    if name is not None:
        return {'name': name, 'source': '/sys/class/dmi/id'}
    return {'name': None, 'source': None}


def parse_default_grub(text):
    """``{name: value}`` of the ``GRUB_*`` assignments of /etc/default/grub (quotes removed; the last one wins)."""
    values = {}
    for line in (text or '').splitlines():
        match = re.match(r'^\s*(GRUB_[A-Z_]+)=(.*)$', line)
        if match:
            value = match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
                value = value[1:-1]
            values[match.group(1)] = value
    return values


def parse_bls_options(text):
    """The ``options`` line of a Boot Loader Specification entry ('' without one)."""
    for line in (text or '').splitlines():
        words = line.split(None, 1)
        if words and words[0] == 'options':
            return words[1].strip() if len(words) == 2 else ''
    return ''
