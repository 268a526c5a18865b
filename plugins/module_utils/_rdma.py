# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
"""The GPUDirect RDMA path: what the gather reads and the rules the readiness checks and the rdma role share.

* ``collect_rdma_facts`` (the only part that touches the node) fills ``kernel_state.rdma`` in the same round trip
  as the rest of gpu_node_facts: the ConnectX functions on the PCI bus, whether ``nvidia_peermem`` is loaded, the
  peer-memory symbols of the RDMA stack (``/proc/kallsyms``), the kernel command line, the IOMMU state and, when
  there is a ConnectX device, the PCIe bridges of ``lspci -D -vvv`` with their ACS control bits.
* ``parse_lspci_vvv``, ``parse_acs_flags``, ``parse_cmdline``, ``kallsyms_symbols``: pure parsers.
* ``peer_memory_result``, ``acs_result``, ``iommu_result``: the three readiness rules (status, expected, observed).
* ``peermem_plan``: the rdma role's decision (load nvidia_peermem, DMA-BUF, or fail naming the missing symbol).

Sources (tests/testbed/REALITY.md R29, ../shared/reference/REALITY.md R29): NVIDIA GPUDirect RDMA manual and GPU
Operator "GPUDirect RDMA" (nvidia-peermem against DMA-BUF; DMA-BUF needs the open kernel modules and Linux 5.12 or
later); NCCL user guide, troubleshooting, "PCI Access Control Services" (ACS on PCI switches redirects P2P to the
root complex); Linux Documentation/admin-guide/kernel-parameters.txt (``iommu=pt``, ``iommu.passthrough=``,
``intel_iommu=off``, ``amd_iommu=off``) and Documentation/ABI/testing/sysfs-kernel-iommu_groups (the group's
``type``: ``identity`` is passthrough, ``DMA``/``DMA-FQ`` translate).

No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

MELLANOX_VENDOR = '0x15b3'
PEERMEM_MODULE = 'nvidia_peermem'
# The peer-memory API nvidia_peermem links against (MLNX_OFED / DOCA-OFED ib_core); without it modprobe fails with
# "Unknown symbol ib_register_peer_memory_client".
PEER_MEMORY_SYMBOLS = ('ib_register_peer_memory_client', 'ib_unregister_peer_memory_client')
PATHS = ('auto', 'peermem', 'dmabuf')
# DMA-BUF for GPUDirect RDMA: Linux 5.12 or later and the open kernel modules (GPU Operator docs, GPUDirect RDMA).
DMABUF_MIN_KERNEL = (5, 12)
LSPCI_ARGS = ('-D', '-vvv')
MODULES_LOAD_FILE = '/etc/modules-load.d/nvidia-peermem.conf'
# The ACS control bits that send peer-to-peer requests or completions up to the root complex.
REDIRECT_BITS = ('ReqRedir', 'CmpltRedir')
ACS_FLAGS = ('SrcValid', 'TransBlk', 'ReqRedir', 'CmpltRedir', 'UpstreamFwd', 'EgressCtrl', 'DirectTrans')
GPU_CLASSES = ('3D controller', 'VGA compatible controller')
NIC_CLASSES = ('Ethernet controller', 'Infiniband controller', 'Network controller')

PASS, FAIL, SKIP = 'pass', 'fail', 'skip'  # nosec B105 (statuses, not passwords)


class RdmaError(Exception):
    """A capture or a setting that cannot be read (the message names the value and what is allowed)."""


# ---------------------------------------------------------------- parsers

_HEADER_RE = re.compile(r'^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+([^:]+?):\s*(.*)$')
_BUS_RE = re.compile(r'Bus:\s+primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)')
_EXPRESS_RE = re.compile(r'Capabilities:\s+\[[0-9a-fA-F]+\]\s+Express\s+(?:\(v\d+\)\s+)?(.+?)(?:\s+\(Slot[+-]\))?,')
_FLAG_RE = re.compile(r'([A-Za-z]+)([+-])')


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
    if klass in GPU_CLASSES and ('NVIDIA' in desc or '[10de:' in desc):
        return 'gpu'
    if klass in NIC_CLASSES and ('Mellanox' in desc or '[15b3:' in desc):
        return 'nic'
    return None


def parse_cmdline(text):
    """The words of ``/proc/cmdline`` up to ``--`` (what follows goes to init, not to the kernel)."""
    words = []
    for word in (text or '').split():
        if word == '--':
            break
        words.append(word)
    return words


def _param(words, name):
    """Values of ``name=`` on the command line, each split at commas (the last occurrence wins in the kernel; all
    are returned in order)."""
    values = []
    for word in words:
        if word.startswith(name + '='):
            values.extend(v for v in word.split('=', 1)[1].split(',') if v)
    return values


def iommu_cmdline(words):
    """What the command line says about the IOMMU (Documentation/admin-guide/kernel-parameters.txt).

    Returns ``{passthrough, off, words}``: ``passthrough`` true for ``iommu=pt`` or ``iommu.passthrough=1`` (false
    for ``iommu=nopt`` or ``iommu.passthrough=0``, None when not said), ``off`` true for ``iommu=off``,
    ``intel_iommu=off`` or ``amd_iommu=off``, ``words`` the IOMMU words found.
    """
    passthrough = None
    for value in _param(words, 'iommu'):
        if value == 'pt':
            passthrough = True
        elif value == 'nopt':
            passthrough = False
    for value in _param(words, 'iommu.passthrough'):
        if value in ('1', 'y', 'Y', 'on'):
            passthrough = True
        elif value in ('0', 'n', 'N', 'off'):
            passthrough = False
    off = any(v == 'off' for name in ('iommu', 'intel_iommu', 'amd_iommu') for v in _param(words, name))
    found = [w for w in words if w.split('=', 1)[0] in ('iommu', 'iommu.passthrough', 'intel_iommu', 'amd_iommu')]
    return {'passthrough': passthrough, 'off': off, 'words': found}


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


def kernel_version(release):
    """``(major, minor)`` of a kernel release (``5.14.0-503.el9.x86_64`` -> (5, 14)); None when unreadable."""
    match = re.match(r'^(\d+)\.(\d+)', str(release or ''))
    return (int(match.group(1)), int(match.group(2))) if match else None


def passthrough_in(args):
    """Whether a kernel command line (or the options of a boot entry) asks for IOMMU passthrough or turns it off."""
    said = iommu_cmdline(parse_cmdline(args))
    return bool(said['passthrough'] or said['off'])


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


def grub_cmdline_line(current, word='iommu=pt'):
    """The ``GRUB_CMDLINE_LINUX=`` line of /etc/default/grub with ``word`` added (``current``: its value)."""
    words = [w for w in (current or '').split() if w.split('=', 1)[0] != word.split('=', 1)[0]]
    return 'GRUB_CMDLINE_LINUX="{0}"'.format(' '.join(words + [word]))


def parse_bls_options(text):
    """The ``options`` line of a Boot Loader Specification entry ('' without one)."""
    for line in (text or '').splitlines():
        words = line.split(None, 1)
        if words and words[0] == 'options':
            return words[1].strip() if len(words) == 2 else ''
    return ''


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
    DMA-BUF works here), ``fail`` (the API is missing and DMA-BUF cannot serve; ``msg`` names the symbol).
    """
    check_path(path)
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


def read_kallsyms(root):
    """The peer-memory symbols /proc/kallsyms defines; None when it cannot be read."""
    try:
        with open(os.path.join(root, 'proc/kallsyms')) as handle:
            return kallsyms_symbols(handle.read())
    except (IOError, OSError):
        return None


def relevant_devices(devices):
    """The part of lspci's devices the rules read: bridges (bus ranges, port type, ACS) and GPU/NIC functions."""
    keep = []
    for dev in devices:
        if dev.get('secondary') is not None or device_kind(dev):
            keep.append(dict((k, dev[k]) for k in ('bus_id', 'class', 'port', 'secondary', 'subordinate', 'acs_ctl',
                                                   'denied')))
    return keep


def collect_rdma_facts(module, root='/', run_status=None, gpu_bus_ids=(), exclude=()):
    """``kernel_state.rdma``. Only a node with ConnectX devices pays for lspci and /proc/kallsyms."""
    connectx = scan_connectx(root, exclude)
    peermem = os.path.isdir(os.path.join(root, 'sys/module', PEERMEM_MODULE))
    cmdline = (_read(os.path.join(root, 'proc/cmdline')) or '').strip()
    facts = {'connectx': connectx, 'peermem_loaded': peermem, 'cmdline': cmdline,
             'iommu': iommu_state(root, list(gpu_bus_ids) + connectx), 'peer_symbols': None, 'bridges': None,
             'lspci_error': None, 'boot_args': read_boot_args(root)}
    if not connectx:
        return facts
    if not peermem:
        facts['peer_symbols'] = read_kallsyms(root)
    if root not in ('/', ''):
        facts['lspci_error'] = 'lspci reads the running system only (root={0})'.format(root)
        return facts
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
