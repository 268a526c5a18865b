# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Parsers of the kernel's and the boot loader's files and of the tools that report them: /proc/driver/nvidia/version,
``modinfo -F license``, /proc/modules, modprobe.d and the kernel command line (blacklists), grubenv, grub.cfg,
Boot Loader Specification entries, ``mokutil`` and the SecureBoot EFI variable, the NVLink 5 bridge VPD mark.

The collector that reads them on the node is collect/_kernel_state.py.  Pure functions; no Ansible import; Python 3.6
compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re


class KernelError(Exception):
    """Kernel related output or files that cannot be understood."""


# VPD model field of the ConnectX-7 functions that bridge to the NVSwitch trays of NVLink 5 boards (HGX B200/B300).
# Source: NVIDIA/gpu-driver-container rhel9/nvidia-driver (_assert_nvlink5_system), siderolabs/extensions nvswitch.go.
NVLINK5_VPD_MARK = b'SW_MNG'


def version_key(release):
    """Sort key comparing numeric runs as numbers (5.14.0-570 > 5.14.0-427)."""
    return [(0, int(part), '') if part.isdigit() else (1, 0, part) for part in re.findall(r'\d+|[^\d]+', release)]


# ---------------------------------------------------------------- NVIDIA module

def parse_nvidia_version_file(text):
    """Parse /proc/driver/nvidia/version: {'version', 'flavour'}."""
    first = text.splitlines()[0] if text.strip() else ''
    if not first.startswith('NVRM version:'):
        raise KernelError("/proc/driver/nvidia/version: first line '{0}' does not start with 'NVRM version:'".format(
            first))
    match = re.search(r'\s(\d+\.\d+(?:\.\d+)*)\s', first + ' ')
    if not match:
        raise KernelError("/proc/driver/nvidia/version: no driver version in '{0}'".format(first))
    flavour = 'open' if 'Open Kernel Module' in first else 'proprietary'
    return {'version': match.group(1), 'flavour': flavour}


def license_flavour(license_text):
    """Flavour from ``modinfo -F license nvidia``: 'Dual MIT/GPL' is open, 'NVIDIA' proprietary."""
    value = license_text.strip().splitlines()[0].strip() if license_text.strip() else ''
    if value == 'Dual MIT/GPL':
        return 'open'
    if value == 'NVIDIA':
        return 'proprietary'
    raise KernelError("modinfo -F license nvidia printed '{0}' (expected 'Dual MIT/GPL' or 'NVIDIA')".format(value))


def parse_proc_modules(text):
    """Names of the modules in /proc/modules."""
    return [line.split(' ', 1)[0] for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------- nouveau

def parse_modprobe_conf(text, module='nouveau'):
    """Return the lines of a modprobe.d file that keep ``module`` from loading: [(lineno, line)]."""
    found = []
    joined = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        joined.append((lineno, raw))
    for lineno, raw in joined:
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        words = line.split()
        if words[0] == 'blacklist' and len(words) >= 2 and words[1] == module:
            found.append((lineno, line))
        elif words[0] == 'install' and len(words) >= 3 and words[1] == module and \
                os.path.basename(words[2]) in ('false', 'true'):
            found.append((lineno, line))
    return found


def cmdline_blacklist(cmdline, module='nouveau'):
    """Kernel command line parameters that blacklist ``module`` (modprobe.blacklist=, rd.driver.blacklist=)."""
    hits = []
    for word in cmdline.split():
        key, _sep, value = word.partition('=')
        if key in ('modprobe.blacklist', 'module_blacklist', 'rd.driver.blacklist') and \
                module in value.split(','):
            hits.append(word)
    return hits


def nvswitch_fabric(nvswitch_count, nvlink5_bridge_count):
    """How the NVSwitches show: 'nvlink5' (IB bridges, B200 and newer), 'pci' (NVIDIA PCI bridges, Hopper), 'none'."""
    if nvlink5_bridge_count:
        return 'nvlink5'
    if nvswitch_count:
        return 'pci'
    return 'none'


def vpd_is_switch_bridge(vpd):
    """True when a PCI VPD blob names the NVSwitch management function (``SW_MNG``)."""
    return NVLINK5_VPD_MARK in (vpd or b'')


# ---------------------------------------------------------------- boot loader

def parse_grubenv(text):
    """GRUB environment block: {name: value}."""
    env = {}
    for line in text.splitlines():
        if line.startswith('#') or '=' not in line:
            continue
        key, value = line.split('=', 1)
        env[key] = value
    return env


_MENU_RE = re.compile(r'^\s*(menuentry|submenu)\s+(\'[^\']*\'|"[^"]*"|\S+)(.*?)\{\s*$')
_ID_RE = re.compile(r'\$menuentry_id_option\s+(\'[^\']*\'|"[^"]*"|\S+)')
_LINUX_RE = re.compile(r'^\s*linux(?:efi|16)?\s+(\S+)')
_DEFAULT_RE = re.compile(r'^\s*set\s+default=(\'[^\']*\'|"[^"]*"|\S+)')


def _unquote(word):
    if len(word) >= 2 and word[0] == word[-1] and word[0] in '\'"':
        return word[1:-1]
    return word


def release_from_image(path):
    """'/boot/vmlinuz-6.1.0-18-amd64' -> '6.1.0-18-amd64'."""
    name = os.path.basename(path.strip())
    for prefix in ('vmlinuz-', 'vmlinux-', 'Image-', 'kernel-'):
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def parse_grub_cfg(text):
    """Return {'entries': tree of {title, id, release, children}, 'defaults': [raw values of set default=]}."""
    root = {'title': None, 'id': None, 'release': None, 'children': []}
    stack = [root]
    defaults = []
    for line in text.splitlines():
        match = _MENU_RE.match(line)
        if match:
            ident = _ID_RE.search(match.group(3))
            node = {'kind': match.group(1), 'title': _unquote(match.group(2)),
                    'id': _unquote(ident.group(1)) if ident else None, 'release': None, 'children': []}
            stack[-1]['children'].append(node)
            stack.append(node)
            continue
        if line.strip() == '}' and len(stack) > 1:
            stack.pop()
            continue
        linux = _LINUX_RE.match(line)
        if linux and len(stack) > 1:
            stack[-1]['release'] = release_from_image(linux.group(1))
            continue
        default = _DEFAULT_RE.match(line)
        if default:
            defaults.append(_unquote(default.group(1)))
    return {'entries': root['children'], 'defaults': defaults}


def resolve_grub_default(cfg, env):
    """Release GRUB boots next from a parsed grub.cfg and grubenv (next_entry, then default/saved_entry)."""
    value = None
    if env.get('next_entry') and any('next_entry' in d for d in cfg['defaults']):
        value = env['next_entry']
    else:
        for raw in cfg['defaults']:
            if 'next_entry' in raw:
                continue
            value = raw
        if value is not None and value.startswith('${') and value.endswith('}'):
            value = env.get(value[2:-1], '')
        if value is None or value == '':
            value = '0'
    return _walk_grub(cfg['entries'], value)


def _walk_grub(entries, value):
    nodes = entries
    node = None
    for part in value.split('>'):
        node = None
        if part.isdigit():
            index = int(part)
            if index < len(nodes):
                node = nodes[index]
        else:
            for candidate in nodes:
                if part in (candidate['title'], candidate['id']):
                    node = candidate
                    break
        if node is None:
            return None
        nodes = node['children']
    if node is None:
        return None
    if node.get('kind') == 'submenu':
        return _walk_grub(node['children'], '0')
    return node['release']


def parse_bls_entry(text):
    """Boot Loader Specification entry: the release of its ``linux`` line (or its ``version``)."""
    version = None
    for line in text.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0] == 'linux':
            release = release_from_image(words[1])
            if release:
                return release
        if len(words) == 2 and words[0] == 'version':
            version = words[1].strip()
    return version


def parse_sb_state(text):
    """``mokutil --sb-state`` -> True, False or None (EFI variables not supported, or unknown text)."""
    for line in text.splitlines():
        line = line.strip()
        if line.lower() == 'secureboot enabled':
            return True
        if line.lower() == 'secureboot disabled':
            return False
    return None


def parse_efi_secure_boot(data):
    """The SecureBoot EFI variable as read from efivarfs: 4 attribute bytes, then 1 (on) or 0 (off)."""
    if data is None or len(data) < 5:
        return None
    return bytearray(data)[4] == 1


def parse_mok_test_key(text):
    """``mokutil --test-key <key>`` -> True (enrolled), False (not enrolled), None (cannot tell)."""
    if 'is already enrolled' in text:
        return True
    if 'is not enrolled' in text:
        return False
    return None
