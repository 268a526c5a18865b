# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The GPUDirect RDMA rules the readiness checks and the rdma role share.

* ``peer_memory_result``, ``acs_result``, ``iommu_result``: the three readiness rules (status, expected, observed).
* ``peermem_plan``: the rdma role's decision (load nvidia_peermem, DMA-BUF, or fail naming the missing symbol).
* ``iommu_boot_plan``: what the kernel role does for ``iommu=pt``.

They read ``kernel_state.rdma`` (collect/_rdma_state.py) through the parsers of parsers/_rdma_path.py.  Sources
(tests/testbed/REALITY.md R29): NVIDIA GPUDirect RDMA manual and GPU Operator "GPUDirect RDMA" (nvidia-peermem
against DMA-BUF; DMA-BUF needs the open kernel modules and Linux 5.12 or later); NCCL user guide, troubleshooting,
"PCI Access Control Services" (ACS on PCI switches redirects P2P to the root complex); Linux
Documentation/admin-guide/kernel-parameters.txt and Documentation/ABI/testing/sysfs-kernel-iommu_groups.

No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel_cmdline import (
    grub_cmdline_line,
    iommu_cmdline,
    kernel_version,
    parse_cmdline,
    passthrough_in,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._rdma_path import PEER_MEMORY_SYMBOLS

PATHS = ('auto', 'peermem', 'dmabuf')
# DMA-BUF for GPUDirect RDMA: Linux 5.12 or later and the open kernel modules (GPU Operator docs, GPUDirect RDMA).
DMABUF_MIN_KERNEL = (5, 12)
MODULES_LOAD_FILE = '/etc/modules-load.d/nvidia-peermem.conf'
# The ACS control bits that send peer-to-peer requests or completions up to the root complex.
REDIRECT_BITS = ('ReqRedir', 'CmpltRedir')

PASS, FAIL, SKIP = 'pass', 'fail', 'skip'  # nosec B105 (statuses, not passwords)


class RdmaError(Exception):
    """A capture or a setting that cannot be read (the message names the value and what is allowed)."""


def iommu_boot_plan(family, running_cmdline, boot_args):
    """What the kernel role does for ``iommu=pt``: ``{grubby, grub_line, reboot, why, error}``.

    EL (``family`` 'el'): ``grubby --update-kernel=ALL --args=iommu=pt`` when a BLS entry lacks it. Debian/Ubuntu:
    the new ``GRUB_CMDLINE_LINUX`` line (then update-grub) when /etc/default/grub lacks it. ``reboot``: the running
    kernel's command line has no passthrough (it takes effect at the next boot only).
    """
    boot_args = boot_args or {}
    out = {'grubby': None, 'grub_line': None, 'reboot': False, 'why': [], 'error': None}
    if family == 'el':
        lacking = sorted(name for name, options in (boot_args.get('bls') or {}).items() if not passthrough_in(options))
        if lacking:
            out['grubby'] = ['grubby', '--update-kernel=ALL', '--args=iommu=pt']
            out['why'].append('iommu=pt: missing from the boot entries {0}'.format(', '.join(lacking)))
    else:
        current = boot_args.get('grub_cmdline_linux')
        both = '{0} {1}'.format(current or '', boot_args.get('grub_cmdline_linux_default') or '')
        if current is not None and not passthrough_in(both):
            out['grub_line'] = grub_cmdline_line(current)
            out['why'].append('iommu=pt: missing from GRUB_CMDLINE_LINUX in /etc/default/grub')
        elif current is None:
            out['error'] = 'iommu=pt: /etc/default/grub not found, so the kernel command line cannot be set'
    if not passthrough_in(running_cmdline):
        out['reboot'] = True
    return out


# ---------------------------------------------------------------- topology rules

def bridges_above(devices, target):
    """The bridges between ``target`` (a bus id) and its root port, nearest first, from the bus ranges lspci
    prints (a bridge is above a device when the device's bus lies in its secondary..subordinate range)."""
    domain, bus = target[:4], int(target[5:7], 16)
    bridges = [d for d in devices if d.get('secondary') is not None and d['bus_id'][:4] == domain]
    chain = []
    seen = set()
    while True:
        holders = [b for b in bridges if b['secondary'] <= bus <= b['subordinate'] and b['bus_id'] not in seen]
        if not holders:
            return chain
        nearest = min(holders, key=lambda b: b['subordinate'] - b['secondary'])
        chain.append(nearest)
        seen.add(nearest['bus_id'])
        bus = int(nearest['bus_id'][5:7], 16)


def acs_redirects(device):
    """The redirect bits set in a bridge's ACS control (``['ReqRedir', 'CmpltRedir']``); [] without ACS."""
    ctl = device.get('acs_ctl') or {}
    return [bit for bit in REDIRECT_BITS if ctl.get(bit)]


def acs_findings(devices, targets):
    """Switch downstream ports above ``targets`` ({bus id: label}) whose ACS redirects peer traffic.

    Returns ``(findings, unreadable)``: findings ``[{bridge, bits, below: [labels]}]`` sorted by bridge, and the
    bridges on those paths whose capabilities lspci could not read.
    """
    by_bridge = {}
    unreadable = set()
    for target in sorted(targets):
        for bridge in bridges_above(devices, target):
            if bridge.get('denied'):
                unreadable.add(bridge['bus_id'])
                continue
            if bridge.get('port') != 'Downstream Port':
                continue
            bits = acs_redirects(bridge)
            if bits:
                entry = by_bridge.setdefault(bridge['bus_id'], {'bridge': bridge['bus_id'], 'bits': bits,
                                                                'below': []})
                entry['below'].append(targets[target])
    return [by_bridge[k] for k in sorted(by_bridge)], sorted(unreadable)


def switch_ports_checked(devices, targets):
    """The switch downstream ports on the paths of ``targets`` (bus ids), sorted."""
    ports = set()
    for target in targets:
        for bridge in bridges_above(devices, target):
            if bridge.get('port') == 'Downstream Port':
                ports.add(bridge['bus_id'])
    return sorted(ports)


def acs_ports_to_clear(rdma, gpu_bus_ids):
    """The switch downstream ports above the node's GPUs and ConnectX devices whose ACS redirects, for the boot unit
    that clears them (the rdma role): ``[bus id]``."""
    findings, _unreadable = acs_findings((rdma or {}).get('bridges') or [], _targets(rdma, gpu_bus_ids))
    return [item['bridge'] for item in findings]


# ---------------------------------------------------------------- readiness rules

def _targets(rdma, gpu_bus_ids):
    targets = {}
    for bus in gpu_bus_ids or []:
        targets[bus] = 'GPU {0}'.format(bus)
    for bus in (rdma or {}).get('connectx') or []:
        targets[bus] = 'ConnectX {0}'.format(bus)
    return targets


def applies(rdma):
    """None when the RDMA checks apply (the node has ConnectX devices), else the reason they skip."""
    if not isinstance(rdma, dict):
        return 'the RDMA facts were not gathered'
    if not rdma.get('connectx'):
        return 'no ConnectX/InfiniBand device on the PCI bus'
    return None


def check_path(path):
    """The declared GPUDirect RDMA path, checked against PATHS."""
    if path not in PATHS:
        raise RdmaError('nodeprep_rdma_path: {0!r} is not one of {1}'.format(path, ', '.join(PATHS)))
    return path


def dmabuf_possible(kernel_release, flavour):
    """Why DMA-BUF cannot serve GPUDirect RDMA on this node (a sentence), or None when it can (Linux 5.12 or later
    and the open kernel modules)."""
    version = kernel_version(kernel_release)
    reasons = []
    if version is None:
        reasons.append('the running kernel is unknown')
    elif version < DMABUF_MIN_KERNEL:
        reasons.append('kernel {0} is older than 5.12'.format(kernel_release))
    if flavour != 'open':
        reasons.append('the loaded nvidia module is {0}, not the open kernel modules'.format(
            flavour or 'of unknown flavour'))
    return '; '.join(reasons) or None


def peer_memory_result(rdma, path, kernel_release=None, flavour=None):
    """rdma.peer_memory: ``(status, expected, observed)``.

    ``path`` (nodeprep_rdma_path): ``auto`` passes with nvidia_peermem loaded or fails naming both ways;
    ``peermem`` wants the module; ``dmabuf`` passes without it when the kernel and driver can serve DMA-BUF.
    """
    check_path(path)
    expected = {'auto': 'nvidia_peermem loaded, or DMA-BUF declared (nodeprep_rdma_path: dmabuf)',
                'peermem': 'nvidia_peermem loaded (nodeprep_rdma_path: peermem)',
                'dmabuf': 'DMA-BUF usable: Linux 5.12 or later and the open kernel modules '
                          '(nodeprep_rdma_path: dmabuf)'}[path]
    why = applies(rdma)
    if why:
        return SKIP, expected, why
    loaded = bool(rdma.get('peermem_loaded'))
    if path == 'dmabuf':
        blocker = dmabuf_possible(kernel_release, flavour)
        if blocker:
            return FAIL, expected, 'DMA-BUF declared but {0}'.format(blocker)
        return PASS, expected, 'DMA-BUF (kernel {0}, open kernel modules); nvidia_peermem {1}'.format(
            kernel_release, 'loaded' if loaded else 'not loaded')
    if loaded:
        return PASS, expected, 'nvidia_peermem loaded (/sys/module/nvidia_peermem)'
    text = 'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX {0}'.format(
        ', '.join(rdma['connectx']))
    missing = missing_peer_symbols(rdma)
    if missing:
        text += '; the RDMA stack lacks {0} (/proc/kallsyms), so modprobe nvidia_peermem fails with "Unknown ' \
                'symbol {1}"'.format(', '.join(missing), missing[0])
    if path == 'auto':
        text += '; load it (rdma role, nodeprep_rdma_peermem: true) or declare DMA-BUF (nodeprep_rdma_path: dmabuf)'
    return FAIL, expected, text


def missing_peer_symbols(rdma):
    """The peer-memory symbols /proc/kallsyms lacks ([] when all are there or kallsyms was not read)."""
    found = (rdma or {}).get('peer_symbols')
    if found is None:
        return []
    return [s for s in PEER_MEMORY_SYMBOLS if s not in found]


def acs_result(rdma, gpu_bus_ids):
    """pci.acs: ``(status, expected, observed)``: no PCIe switch downstream port above a GPU or a ConnectX device
    redirects peer traffic (ACSCtl ReqRedir+ or CmpltRedir+)."""
    expected = 'ACS redirect off (ACSCtl ReqRedir- CmpltRedir-) on the PCIe switch downstream ports above the GPUs ' \
               'and ConnectX devices'
    why = applies(rdma)
    if why:
        return SKIP, expected, why
    if rdma.get('lspci_error'):
        return FAIL, expected, 'lspci -D -vvv could not be read: {0}'.format(rdma['lspci_error'])
    devices = rdma.get('bridges') or []
    targets = _targets(rdma, gpu_bus_ids)
    findings, unreadable = acs_findings(devices, targets)
    problems = ['{0} (above {1}): ACSCtl {2}'.format(item['bridge'], ', '.join(item['below']),
                                                     ' '.join(bit + '+' for bit in item['bits']))
                for item in findings]
    if unreadable:
        problems.append('capabilities not readable (lspci not run as root) on {0}'.format(', '.join(unreadable)))
    if problems:
        return FAIL, expected, 'ACS redirects peer traffic through the root complex at switch downstream ' \
                               'port ' + '; '.join(problems)
    ports = switch_ports_checked(devices, targets)
    if not ports:
        return PASS, expected, 'no PCIe switch between the {0} GPUs/ConnectX devices and their root ports'.format(
            len(targets))
    return PASS, expected, 'ACS redirect off on {0} switch downstream ports above {1} GPUs/ConnectX devices'.format(
        len(ports), len(targets))


def iommu_result(rdma, gpu_bus_ids):
    """kernel.iommu: ``(status, expected, observed)``: the IOMMU is off, or in passthrough for the GPUs and ConnectX
    devices (their IOMMU group's type is ``identity``; without group types, ``iommu=pt`` on the command line)."""
    expected = 'IOMMU off or in passthrough (iommu=pt) for the GPUs and ConnectX devices'
    why = applies(rdma)
    if why:
        return SKIP, expected, why
    iommu = rdma.get('iommu') or {}
    words = iommu_cmdline(parse_cmdline(rdma.get('cmdline')))
    said = ' '.join(words['words']) or 'no IOMMU parameter'
    if not iommu.get('groups'):
        return PASS, expected, 'IOMMU off: no IOMMU group in /sys/kernel/iommu_groups (cmdline: {0})'.format(said)
    types = iommu.get('device_types') or {}
    targets = _targets(rdma, gpu_bus_ids)
    translated = []
    unknown = []
    for bus in sorted(targets):
        kind = types.get(bus)
        if kind is None:
            unknown.append(bus)
        elif kind != 'identity':
            translated.append('{0} (group type {1})'.format(targets[bus], kind))
    if translated:
        return FAIL, expected, 'IOMMU translating DMA for {0}; cmdline: {1}'.format(', '.join(translated), said)
    if unknown and not words['passthrough']:
        return FAIL, expected, 'IOMMU on ({0} groups) and no iommu=pt on the command line; group type unknown ' \
                               'for {1}'.format(iommu['groups'], ', '.join(targets[b] for b in unknown))
    return PASS, expected, 'IOMMU in passthrough ({0} groups{1}); cmdline: {2}'.format(
        iommu['groups'], ', identity for all {0} devices'.format(len(targets) - len(unknown)) if types else '', said)


# ---------------------------------------------------------------- the rdma role's decision

def peermem_plan(rdma, want, path, kernel_release=None, flavour=None):
    """What the rdma role does about nvidia_peermem: ``{action, msg, persist}``.

    ``action``: ``skip`` (not asked, or no ConnectX device), ``none`` (loaded already), ``load`` (modprobe, and
    persist in modules-load.d), ``dmabuf`` (DMA-BUF is the path: declared, or the peer-memory API is missing and
    DMA-BUF works here), ``fail`` (DMA-BUF declared where it cannot serve, asked or not to load nvidia_peermem:
    ``dmabuf_possible`` decides; or the API is missing and DMA-BUF cannot serve; ``msg`` names the symbol).
    """
    check_path(path)
    if path == 'dmabuf' and applies(rdma) is None:
        # The declared path is the site's, whether or not the role loads nvidia_peermem: a node that cannot serve it
        # is refused (readiness fails rdma.peer_memory there, and no run of the role would change that).
        blocker = dmabuf_possible(kernel_release, flavour)
        if blocker:
            return {'action': 'fail', 'msg': 'DMA-BUF declared (nodeprep_rdma_path: dmabuf) but {0}; DMA-BUF needs '
                                             'Linux 5.12 or later and the open kernel modules: declare '
                                             'nodeprep_rdma_path: auto or peermem (with nodeprep_rdma_peermem: true) '
                                             'for this node, or load the open kernel modules'.format(blocker),
                    'persist': False}
    if not want:
        return {'action': 'skip', 'msg': 'nodeprep_rdma_peermem is false', 'persist': False}
    why = applies(rdma)
    if why:
        return {'action': 'skip', 'msg': why, 'persist': False}
    if path == 'dmabuf':
        return {'action': 'dmabuf', 'msg': 'DMA-BUF declared (nodeprep_rdma_path: dmabuf); nvidia_peermem not '
                                           'needed', 'persist': False}
    if rdma.get('peermem_loaded'):
        return {'action': 'none', 'msg': 'nvidia_peermem loaded', 'persist': True}
    if rdma.get('peer_symbols') is None:
        return {'action': 'fail', 'msg': '/proc/kallsyms was not read, so whether the RDMA stack exports {0} is '
                                         'unknown'.format(PEER_MEMORY_SYMBOLS[0]), 'persist': False}
    missing = missing_peer_symbols(rdma)
    if not missing:
        return {'action': 'load', 'msg': 'load nvidia_peermem (the RDMA stack exports {0})'.format(
            ', '.join(PEER_MEMORY_SYMBOLS)), 'persist': True}
    blocker = dmabuf_possible(kernel_release, flavour)
    if path == 'auto' and blocker is None:
        msg = 'the RDMA stack lacks {0}; DMA-BUF is the path (kernel {1}, open kernel modules): declare ' \
              'nodeprep_rdma_path: dmabuf'.format(', '.join(missing), kernel_release)
        return {'action': 'dmabuf', 'msg': msg, 'persist': False}
    return {'action': 'fail', 'msg': 'cannot load nvidia_peermem: the RDMA stack lacks {0} (modprobe would fail '
                                     'with "Unknown symbol {1}"; install MLNX_OFED/DOCA-OFED){2}'.format(
                                         ', '.join(missing), missing[0],
                                         '' if path == 'peermem' else ', and DMA-BUF cannot serve: ' + blocker),
            'persist': False}
