# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The GPUDirect RDMA rules the readiness checks and the rdma role share.

* ``peer_memory_result``, ``acs_result``, ``iommu_result``: the three readiness rules (status, expected, observed).
* ``peermem_plan``: the rdma role's decision (DMA-BUF where it serves, else load nvidia_peermem, or fail naming the
  missing symbol or the nvidia_peermem built without the peer-memory API).
* ``acs_unit_ports``, ``setpci_argv``, ``acs_vm_refusal``: which ports the ACS boot unit clears, how, and where it must
  not; the plan and the boot script (roles/rdma/files/nodeprep-pci-acs, which runs this file on the node) call them.
* ``iommu_boot_plan``: what the kernel role does for ``iommu=pt``.

They read ``kernel_state.rdma`` (collect/_rdma_state.py) through the parsers of parsers/_rdma_path.py.  Sources
(tests/testbed/REALITY.md R29): NVIDIA GPUDirect RDMA manual and GPU Operator "GPUDirect RDMA" (nvidia-peermem
against DMA-BUF; DMA-BUF needs the open kernel modules and Linux 5.12 or later; NVIDIA recommends DMA-BUF, CUDA 13.0
deprecates the NV-P2P API nvidia-peermem is built on); kernel-open/nvidia-peermem/nvidia-peermem.c of
NVIDIA/open-gpu-kernel-modules (built without the MLNX/DOCA-OFED peer-memory symbols, its init returns -EINVAL and it
references no ib_core symbol); NCCL user guide, troubleshooting,
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
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._rdma_path import (
    DMABUF_SYMBOLS,
    PEER_MEMORY_SYMBOLS,
    PEERMEM_RDMA_DEPENDENCY,
    device_kind,
)

PATHS = ('auto', 'peermem', 'dmabuf')
# DMA-BUF for GPUDirect RDMA: Linux 5.12 or later and the open kernel modules (GPU Operator docs, GPUDirect RDMA).
DMABUF_MIN_KERNEL = (5, 12)
# The first NVIDIA driver branch with the open kernel modules and DMA-BUF export of GPU memory (515; CUDA 11.7 added
# CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).
DMABUF_MIN_DRIVER = 515
# The ACS Control register: offset 6 of the ACS extended capability (PCIe base spec; setpci knows ECAP_ACS).
ACS_CONTROL = 'ECAP_ACS+0x6.w'
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

def split_bus_id(bus_id):
    """``(domain, bus)`` of a PCI address: the domain as an int (four hex digits, or five and more on a VMD domain
    such as ``10000:00:01.0``; 0 when absent) and the bus number; ``(None, None)`` for text that is no address."""
    parts = str(bus_id or '').split(':')
    try:
        if len(parts) == 3:
            return int(parts[0], 16), int(parts[1], 16)
        if len(parts) == 2:
            return 0, int(parts[0], 16)
    except ValueError:
        pass
    return None, None


def _address(bus_id):
    """A PCI address in one spelling whatever its domain's width (``0000:19:00.0``, ``00000000:19:00.0``)."""
    domain, bus = split_bus_id(bus_id)
    return domain, bus, str(bus_id).lower().rsplit(':', 1)[-1]


def bridges_above(devices, target):
    """The bridges between ``target`` (a bus id) and its root port, nearest first, from the bus ranges lspci
    prints (a bridge is above a device when the device's bus lies in its secondary..subordinate range)."""
    domain, bus = split_bus_id(target)
    if bus is None:
        return []
    bridges = [d for d in devices if d.get('secondary') is not None and split_bus_id(d['bus_id'])[0] == domain]
    chain = []
    seen = set()
    while True:
        holders = [b for b in bridges if b['secondary'] <= bus <= b['subordinate'] and b['bus_id'] not in seen]
        if not holders:
            return chain
        nearest = min(holders, key=lambda b: b['subordinate'] - b['secondary'])
        chain.append(nearest)
        seen.add(nearest['bus_id'])
        bus = split_bus_id(nearest['bus_id'])[1]


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


def acs_unit_targets(devices):
    """The bus ids of the GPUs and ConnectX functions among lspci's ``devices`` (the gathered ones carry ``kind``; a
    device parsed on the node at boot is classed by ``device_kind``)."""
    return sorted(d['bus_id'] for d in devices if (d['kind'] if 'kind' in d else device_kind(d)))


def acs_unit_ports(devices):
    """The ports the ACS boot unit clears: the PCIe switch downstream ports above the GPUs and ConnectX functions
    whose ACS control lspci shows, sorted.  Found by their place above the devices in lspci's bus ranges each time
    (a BIOS or adapter change renumbers the buses), never from bus ids remembered."""
    ports = set()
    for target in acs_unit_targets(devices):
        for bridge in bridges_above(devices, target):
            if bridge.get('port') == 'Downstream Port' and bridge.get('acs_ctl') is not None:
                ports.add(bridge['bus_id'])
    return sorted(ports)


def setpci_argv(port):
    """The argv that clears the ACS control of ``port`` (a bus id)."""
    return ['setpci', '-s', port, '{0}=0000'.format(ACS_CONTROL)]


def acs_vm_refusal(virt, host=''):
    """Why ACS must not be changed on this node (a sentence), or None: a virtual machine (``virt``: what
    parsers/_rdma_path.virtualization says, ``{name, source}``) keeps ACS on: the hypervisor relies on it to
    isolate the devices passed through (gpud skips ACS on KVM)."""
    name = (virt or {}).get('name')
    if not name or name == 'none':
        return None
    return '{0} is a virtual machine ({1}: {2}): ACS must stay on in a virtual machine, so the ACS boot unit is ' \
           'refused; set nodeprep_rdma_acs_unit: false for it and leave ACS to the hypervisor\'s host'.format(
               host or 'this node', virt.get('source') or 'detected', name)


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


def driver_branch(version):
    """The branch (an int: 580) of an NVIDIA driver version (``580.82.07``), None when unknown."""
    try:
        return int(str(version).split('.', 1)[0])
    except (TypeError, ValueError):
        return None


def dmabuf_possible(kernel_release, flavour, driver_version=None, rdma=None):
    """Why DMA-BUF cannot serve GPUDirect RDMA on this node (a sentence), or None when it can: Linux 5.12 or later,
    the open kernel modules (515 or later), and an RDMA stack with DMA-BUF registration (``ib_umem_dmabuf_get`` in
    /proc/kallsyms; not judged when kallsyms was not read)."""
    version = kernel_version(kernel_release)
    reasons = []
    if version is None:
        reasons.append('the running kernel is unknown')
    elif version < DMABUF_MIN_KERNEL:
        reasons.append('kernel {0} is older than 5.12'.format(kernel_release))
    if flavour != 'open':
        reasons.append('the loaded nvidia module is {0}, not the open kernel modules'.format(
            flavour or 'of unknown flavour'))
    branch = driver_branch(driver_version)
    if branch is not None and branch < DMABUF_MIN_DRIVER:
        reasons.append('driver {0} is older than {1}'.format(driver_version, DMABUF_MIN_DRIVER))
    found = (rdma or {}).get('dmabuf_symbols')
    if found is not None:
        lacking = [name for name in DMABUF_SYMBOLS if name not in found]
        if lacking:
            reasons.append('the RDMA stack lacks {0} (/proc/kallsyms)'.format(', '.join(lacking)))
    return '; '.join(reasons) or None


def peermem_without_ofed(rdma):
    """The nvidia_peermem of the running kernel was built without the MLNX_OFED/DOCA-OFED peer-memory API (the
    driver was built before OFED was installed): its ``depends`` (modinfo) lacks ib_core, and its init returns
    -EINVAL.  Returns the sentence that names it, or None (built with the API, or not known)."""
    module = (rdma or {}).get('peermem_module') or {}
    depends = module.get('depends')
    if not module.get('found') or depends is None or PEERMEM_RDMA_DEPENDENCY in depends:
        return None
    return 'nvidia_peermem was built without the peer-memory API of MLNX_OFED/DOCA-OFED (modinfo -F depends ' \
           'nvidia_peermem: {0}; no {1}): its init returns -EINVAL and modprobe nvidia_peermem fails with "Invalid ' \
           'argument"; rebuild the driver after installing OFED (dkms install, or reinstall the driver packages)' \
           ''.format("'{0}'".format(','.join(depends)) if depends else 'none', PEERMEM_RDMA_DEPENDENCY)


def peer_memory_result(rdma, path, kernel_release=None, flavour=None, driver_version=None):
    """rdma.peer_memory: ``(status, expected, observed)``, judging the path in use.

    ``path`` (nodeprep_rdma_path): ``auto`` passes where DMA-BUF serves (``dmabuf_possible``), else with
    nvidia_peermem loaded; ``peermem`` wants the module; ``dmabuf`` passes without it when DMA-BUF serves.
    """
    check_path(path)
    expected = {'auto': 'DMA-BUF usable (Linux 5.12 or later, the open kernel modules, an RDMA stack with DMA-BUF), '
                        'else nvidia_peermem loaded',
                'peermem': 'nvidia_peermem loaded (nodeprep_rdma_path: peermem)',
                'dmabuf': 'DMA-BUF usable: Linux 5.12 or later and the open kernel modules '
                          '(nodeprep_rdma_path: dmabuf)'}[path]
    why = applies(rdma)
    if why:
        return SKIP, expected, why
    loaded = bool(rdma.get('peermem_loaded'))
    blocker = dmabuf_possible(kernel_release, flavour, driver_version, rdma) if path != 'peermem' else None
    if path != 'peermem' and blocker is None:
        return PASS, expected, 'DMA-BUF (kernel {0}, open kernel modules); nvidia_peermem {1}'.format(
            kernel_release, 'loaded' if loaded else 'not loaded')
    if path == 'dmabuf':
        return FAIL, expected, 'DMA-BUF declared but {0}'.format(blocker)
    if loaded:
        return PASS, expected, 'nvidia_peermem loaded (/sys/module/nvidia_peermem)'
    text = 'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX {0}'.format(
        ', '.join(rdma['connectx']))
    missing = missing_peer_symbols(rdma)
    no_ofed = peermem_without_ofed(rdma)
    if missing:
        text += '; the RDMA stack lacks {0} (/proc/kallsyms), so modprobe nvidia_peermem fails with "Unknown ' \
                'symbol {1}"'.format(', '.join(missing), missing[0])
    elif no_ofed:
        text += '; ' + no_ofed
    if path == 'auto':
        text += '; DMA-BUF cannot serve here ({0}){1}'.format(
            blocker, '' if missing or no_ofed else ': load nvidia_peermem (rdma role, nodeprep_rdma_peermem: true)')
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
    if not devices:
        return FAIL, expected, ('lspci -D -vvv listed no PCI device (empty output), so the switch ports above the {0} '
                                'GPUs/ConnectX devices could not be judged'.format(len(targets)))
    listed = set(_address(d['bus_id']) for d in devices)
    absent = [targets[t] for t in sorted(targets) if _address(t) not in listed]
    unlisted = []
    if absent:
        unlisted.append('lspci -D -vvv does not list {0} of the {1} GPUs/ConnectX devices ({2}): its output is cut '
                        'short (or lspci cannot see them), so the switch ports above them could not be judged'.format(
                            len(absent), len(targets), ', '.join(absent)))
    findings, unreadable = acs_findings(devices, targets)
    problems = ['{0} (above {1}): ACSCtl {2}'.format(item['bridge'], ', '.join(item['below']),
                                                     ' '.join(bit + '+' for bit in item['bits']))
                for item in findings]
    if unreadable:
        problems.append('capabilities not readable (lspci not run as root) on {0}'.format(', '.join(unreadable)))
    if problems:
        unlisted.append('ACS redirects peer traffic through the root complex at switch downstream port ' +
                        '; '.join(problems))
    if unlisted:
        return FAIL, expected, '; '.join(unlisted)
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

def peermem_plan(rdma, want, path, kernel_release=None, flavour=None, driver_version=None):
    """What the rdma role does about nvidia_peermem: ``{action, msg, persist}``.

    ``action``: ``skip`` (not asked, or no ConnectX device), ``dmabuf`` (DMA-BUF is the path: declared, or ``auto``
    where ``dmabuf_possible`` says it serves; nvidia_peermem is then not loaded), ``none`` (loaded already), ``load``
    (modprobe, and persist in modules-load.d), ``fail`` (DMA-BUF declared where it cannot serve, asked or not to load
    nvidia_peermem; the peer-memory API missing, or nvidia_peermem built without it, where DMA-BUF cannot serve: the
    ``msg`` names the symbol or the rebuild, before any modprobe).
    """
    check_path(path)
    if path == 'dmabuf' and applies(rdma) is None:
        # The declared path is the site's, whether or not the role loads nvidia_peermem: a node that cannot serve it
        # is refused (readiness fails rdma.peer_memory there, and no run of the role would change that).
        blocker = dmabuf_possible(kernel_release, flavour, driver_version, rdma)
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
    blocker = dmabuf_possible(kernel_release, flavour, driver_version, rdma)
    if path == 'auto' and blocker is None:
        return {'action': 'dmabuf', 'msg': 'DMA-BUF (kernel {0}, open kernel modules{1}); nvidia_peermem not '
                                           'loaded'.format(kernel_release, ', RDMA stack with {0}'.format(
                                               DMABUF_SYMBOLS[0]) if rdma.get('dmabuf_symbols') else ''),
                'persist': False}
    if rdma.get('peermem_loaded'):
        return {'action': 'none', 'msg': 'nvidia_peermem loaded', 'persist': True}
    if rdma.get('peer_symbols') is None:
        return {'action': 'fail', 'msg': '/proc/kallsyms was not read, so whether the RDMA stack exports {0} is '
                                         'unknown'.format(PEER_MEMORY_SYMBOLS[0]), 'persist': False}
    tail = '' if path == 'peermem' else ', and DMA-BUF cannot serve: ' + blocker
    missing = missing_peer_symbols(rdma)
    if missing:
        return {'action': 'fail', 'msg': 'cannot load nvidia_peermem: the RDMA stack lacks {0} (modprobe would fail '
                                         'with "Unknown symbol {1}"; install MLNX_OFED/DOCA-OFED){2}'.format(
                                             ', '.join(missing), missing[0], tail), 'persist': False}
    no_ofed = peermem_without_ofed(rdma)
    if no_ofed:
        return {'action': 'fail', 'msg': 'cannot load nvidia_peermem: {0}{1}; nothing changed'.format(no_ofed, tail),
                'persist': False}
    return {'action': 'load', 'msg': 'load nvidia_peermem (the RDMA stack exports {0})'.format(
        ', '.join(PEER_MEMORY_SYMBOLS)), 'persist': True}
